"""Conversation lanes: one turn at a time per conversation, in order.

Each conversation with work to do has a lane: a task that runs its jobs one
after another and disappears when idle (a gateway serves many thousands of
conversations; idle ones cost nothing).  A lane's jobs are, in order:

1. replies already in the outbox (recovered after a restart) -- delivered first,
   so a conversation's answers never overtake each other;
2. pending messages -- *coalesced*: the lane waits ``coalesce_window_s`` after
   the latest message from the same sender (at most ``coalesce_max_s`` after
   the first) and answers the burst with one turn.

A message arriving while a turn runs is never lost and never answered twice:
for ``mid_turn: merge`` partners the responder takes it at its next round
boundary (``Turn.take_arrivals``) and the reply covers it; otherwise it waits
for the next turn.  The reply and the "answered" marks of every message it
covers are written in one transaction (the transactional outbox).

Files are fetched here, after the ack and before the turn that reads them
(:mod:`gateway.pipeline.media`).  The responder takes arrivals without waiting,
so a message with a file to fetch is not merged into a running turn: it, and
whatever comes after it, waits in order for the next turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from gateway.core.config import MidTurn, PartnerConfig, PipelineConfig, ToolRule
from gateway.core.events import Progress, StreamDelta, StreamEnd, TurnEnd
from gateway.core.messages import Address, Attachment, InboundMessage, OutboundReply
from gateway.core.phrases import ENGLISH, Phrase, language_for, say
from gateway.core.turns import Responder, Role, Turn
from gateway.pipeline.delivery import Delivery, Outlet
from gateway.pipeline.media import MediaFetch, awaits_fetch
from gateway.pipeline.outbox import Outbox, reply_key
from gateway.pipeline.streaming import PreviewStream
from gateway.store import InboundState, InboxStore, OutboxStore


class LaneStore(InboxStore, OutboxStore, Protocol):
    """What the lanes use of the store: marking inbound messages, and finding a recovered turn's reply."""

log = logging.getLogger(__name__)

STOP_COMMAND = "/stop"
STOPPED = say(Phrase.STOPPED, ENGLISH)
"""The English notices (the catalogue's ``gateway/core/phrases.toml`` holds every language's)."""
NOTHING_TO_STOP = say(Phrase.NOTHING_TO_STOP, ENGLISH)


@dataclass
class Admitted:
    """A message that passed routing and access, with what they decided."""

    message: InboundMessage
    partner: PartnerConfig
    role: Role
    recovered: bool = False
    """Left unanswered by a previous run: its turn may have an outbox row (and a preview) already."""
    context_rules: tuple[ToolRule, ...] = ()
    """Tool rules from the conversation's settings (a group's ``remove_tools``)."""


@dataclass
class Lane:
    key: str
    outlet: Outlet
    deliveries: deque[str] = field(default_factory=deque)
    pending: list[Admitted] = field(default_factory=list)
    arrivals: list[Admitted] = field(default_factory=list)
    merging: bool = False
    responding: asyncio.Task | None = None
    """The responder of the turn in progress, so ``/stop`` can cancel it."""
    stop: Admitted | None = None
    batch: list[Admitted] = field(default_factory=list)
    """The messages of the turn in progress, arrivals it took included."""
    delivering: str | None = None
    """The reply key being delivered."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class Lanes:
    def __init__(
        self,
        store: LaneStore,
        outbox: Outbox,
        delivery: Delivery,
        responder: Responder,
        settings: PipelineConfig,
        outlet_for: Callable[[str, str], Outlet | None],
        media: MediaFetch | None = None,
    ) -> None:
        self.media = media
        self.store = store
        self.outbox = outbox
        outbox.on_ready(self.resume_delivery)  # what the dispatcher, the teacher desk and reminders write
        self.delivery = delivery
        self.responder = responder
        self.settings = settings
        self.outlet_for = outlet_for
        self._lanes: dict[str, Lane] = {}
        self._closing = False
        self._idle = asyncio.Event()
        self._idle.set()

    # ------------------------------------------------------------------ intake

    def submit(self, admitted: Admitted) -> None:
        lane = self._lane(admitted.message.address)
        if lane is None:
            return
        if admitted.message.text.strip().casefold() == STOP_COMMAND and lane.responding is not None and lane.stop is None:
            lane.stop = admitted
            lane.responding.cancel()
            return
        if lane.merging and admitted.partner.mid_turn is MidTurn.MERGE and awaits_fetch(admitted.message):
            lane.merging = False  # its file is fetched before a turn: it and what follows wait, in order
            lane.pending.extend(lane.arrivals)
            lane.arrivals = []
            lane.pending.append(admitted)
        elif lane.merging and admitted.partner.mid_turn is MidTurn.MERGE:
            lane.arrivals.append(admitted)
        else:
            lane.pending.append(admitted)
        lane.wake.set()
        self._ensure_running(lane)

    def resume_delivery(self, key: str, target: Address) -> bool:
        """Queue the ready reply ``key`` on its conversation's lane (the outbox's wake-up); False when it
        already is queued or being delivered, or its channel does not run."""
        if self.delivering(key):
            return False
        lane = self._lane(target)
        if lane is None:
            return False
        lane.deliveries.append(key)
        self._ensure_running(lane)
        return True

    def _lane(self, address: Address) -> Lane | None:
        key = address.conversation_key
        lane = self._lanes.get(key)
        if lane is None:
            outlet = self.outlet_for(address.channel, address.account)
            if outlet is None:
                log.warning("no running channel for conversation=%s; left in the store for later", key)
                return None
            lane = self._lanes[key] = Lane(key, outlet)
        return lane

    def _ensure_running(self, lane: Lane) -> None:
        if lane.task is None and not self._closing:
            self._idle.clear()
            lane.task = asyncio.create_task(self._run(lane), name=f"lane:{lane.key}")

    @property
    def active(self) -> int:
        return len(self._lanes)

    def holds(self, key: tuple[str, str, str]) -> bool:
        """True while a lane has the message (waiting, in the turn in progress, or stopping it)."""
        for lane in self._lanes.values():
            held = [*lane.pending, *lane.arrivals, *lane.batch, *([lane.stop] if lane.stop else [])]
            if any(a.message.dedup_key == key for a in held):
                return True
        return False

    def delivering(self, key: str) -> bool:
        """True while a lane delivers the reply or has it queued."""
        return any(lane.delivering == key or key in lane.deliveries for lane in self._lanes.values())

    async def drain(self) -> None:
        """Wait until every lane has finished its work (used by graceful shutdown)."""
        await self._idle.wait()

    async def cancel_all(self) -> None:
        self._closing = True
        tasks = [lane.task for lane in self._lanes.values() if lane.task]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ the lane loop

    async def _run(self, lane: Lane) -> None:
        try:
            while True:
                if lane.deliveries:
                    lane.delivering = lane.deliveries.popleft()
                    await self.delivery.deliver(lane.delivering, lane.outlet)
                    lane.delivering = None
                    continue
                if not lane.pending:
                    break
                lane.batch = await self._coalesce(lane)
                await self._turn(lane, lane.batch)
                lane.batch, lane.delivering = [], None
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("lane failed conversation=%s; its messages stay pending until the store writes again"
                          " or the next start", lane.key)
        finally:
            lane.task = None
            lane.batch, lane.delivering = [], None
            if (lane.pending or lane.deliveries) and not self._closing:
                self._ensure_running(lane)
            else:
                self._lanes.pop(lane.key, None)
                if not self._lanes:
                    self._idle.set()

    async def _coalesce(self, lane: Lane) -> list[Admitted]:
        window, cap = self.settings.coalesce_window_s, self.settings.coalesce_max_s
        if window > 0:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + cap
            while True:
                lane.wake.clear()
                timeout = min(window, deadline - loop.time())
                if timeout <= 0:
                    break
                try:
                    await asyncio.wait_for(lane.wake.wait(), timeout)
                except TimeoutError:
                    break
        lane.wake.clear()
        first = lane.pending[0]
        batch = [a for a in lane.pending if a.message.sender.user == first.message.sender.user]
        lane.pending = [a for a in lane.pending if a.message.sender.user != first.message.sender.user]
        return batch

    async def _turn(self, lane: Lane, batch: list[Admitted]) -> None:
        if self.media is not None:
            for admitted in batch:
                admitted.message = await self.media.resolve(admitted.message)
        first = batch[0]
        message = first.message
        key = reply_key(message.address, message.event_id)
        # Merging starts before the first await: whatever arrives from here on is an arrival, so the
        # pending queue only ever holds messages older than every arrival (their order is kept below).
        lane.merging = first.partner.mid_turn is MidTurn.MERGE
        existing = await self.store.get_reply(key) if any(a.recovered for a in batch) else None
        language = language_for(first.partner.languages, message.sender.locale)  # the brain's choice for this turn, too
        template = OutboundReply(idempotency_key=key, target=message.address, referrer=batch[-1].message.referrer, markdown="",
                                 language=language)
        preview = PreviewStream(lane.outlet, self.store, template, existing.preview if existing else None)
        taken: list[Admitted] = []

        def take_arrivals() -> list[InboundMessage]:
            fresh, lane.arrivals = lane.arrivals, []
            taken.extend(fresh)
            lane.batch = [*lane.batch, *fresh]
            return [a.message for a in fresh]

        turn = Turn(first.partner, message.address, message.sender, first.role, [a.message for a in batch], take_arrivals,
                    context_rules=first.context_rules)
        if all(a.message.text.strip().casefold() == STOP_COMMAND for a in batch):
            markdown, attachments = say(Phrase.NOTHING_TO_STOP, language), ()
        else:
            lane.responding = asyncio.create_task(self._respond(turn, preview))
            try:
                markdown, attachments = await lane.responding
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if lane.stop is None or (current is not None and current.cancelling()):
                    raise  # shutdown, not /stop: the messages stay pending for the next start
                markdown, attachments = say(Phrase.STOPPED, language), ()
                taken.append(lane.stop)
                lane.batch = [*lane.batch, lane.stop]
                log.info("turn stopped by the learner conversation=%s", lane.key)
            finally:
                lane.responding, lane.stop = None, None
        await preview.close()
        lane.merging = False
        lane.pending.extend(lane.arrivals)  # arrivals the responder never took are newer than anything pending
        lane.arrivals = []
        covered = [a.message for a in (*batch, *taken)]
        keys = [m.dedup_key for m in covered]
        if markdown is None:
            await self.store.mark_inbound(keys, InboundState.DROPPED, "the partner chose not to answer")
            return
        reply = template.model_copy(
            update={"markdown": markdown, "attachments": attachments, "in_reply_to": tuple(m.event_id for m in covered)}
        )
        item = await self.outbox.write(reply, answered=keys)  # this lane delivers it: no wake-up
        lane.delivering = key
        await self.delivery.deliver(key, lane.outlet, first_received=message.received_at, item=item)

    async def _respond(self, turn: Turn, preview: PreviewStream) -> tuple[str | None, tuple]:
        """Run the responder; return the final Markdown (None: stay silent) and attachments."""
        preview.start()
        text, final = "", None
        attachments: tuple[Attachment, ...] = ()
        try:
            async for event in self.responder.respond(turn):
                if isinstance(event, StreamDelta):
                    text += event.text
                    preview.update(text)
                elif isinstance(event, StreamEnd):
                    final, attachments = event.markdown, event.attachments
                elif isinstance(event, Progress):
                    log.debug("turn progress conversation=%s label=%s", turn.address.conversation_key, event.label)
                elif isinstance(event, TurnEnd):
                    if not event.answered:
                        return None, ()
                    break
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("responder failed conversation=%s partner=%s", turn.address.conversation_key, turn.partner.id)
            return say(Phrase.DELIVERY_APOLOGY, language_for(turn.partner.languages, turn.sender.locale)), ()
        if final is None:
            final = text
        if final.strip() or attachments:
            return final, attachments
        return say(Phrase.DELIVERY_APOLOGY, language_for(turn.partner.languages, turn.sender.locale)), ()
