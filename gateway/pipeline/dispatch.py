"""Dispatch: decide what happens to each durable inbound message.

Runs after ingest, off the acknowledgement path: drop the bot's own echoes
and messages with nothing visible in them (only zero-width spaces, joiners,
bidi marks, control characters or lone combining marks: no turn, a recorded
reason, no notice), route to the partner bound to the account / group /
conversation, apply the access policy, answer a chat's ``/start`` with the partner's greeting
(:mod:`gateway.pipeline.greeting`), then hand admitted messages to their
conversation lane.  A
message that is not answered is marked with the reason (logged and counted);
refused senders may get a short, rate-limited notice; a stranger waiting for
pairing has their messages *held* and answered once the owner approves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from gateway.core.capabilities import authenticates_senders
from gateway.core.config import AccessPolicy, PartnerConfig, ToolRule
from gateway.core.messages import ConversationKind, InboundMessage, Media, OutboundReply, ReplyAuthor, has_visible
from gateway.core.phrases import Phrase, language_for, say
from gateway.core.turns import Role
from gateway.metrics import Metrics
from gateway.pipeline.access import Verdict, decide
from gateway.pipeline.greeting import greeting_of, opens_chat
from gateway.pipeline.lanes import Admitted, Lanes
from gateway.pipeline.outbox import Outbox, reply_key
from gateway.pipeline.routing import Router
from gateway.store import AccessStore, InboundState, InboxStore


class DispatchStore(InboxStore, AccessStore, Protocol):
    """What dispatch uses of the store: the inbox's states, and who may talk."""

log = logging.getLogger(__name__)
NEGATIVE_APPROVAL_TTL_S = 5.0
PAIRING_SOURCES = 100
"""With per-source bounds, an account holds at most this many sources' worth of pending codes."""
NOTHING_VISIBLE = "nothing visible in the message"



class TeacherHook(Protocol):
    async def intercept(self, message: InboundMessage, partner: PartnerConfig, role: Role) -> bool:
        """Handle a message meant for the teacher (a command, or a conversation they took over)."""
        ...


def _says_nothing(message: InboundMessage) -> bool:
    """No media and no visible character (``InboundMessage.text`` has set a leading "@bot" aside)."""
    return not any(isinstance(e, Media) for e in message.elements) and not has_visible(message.text)


def _group_rules(policy: AccessPolicy, message: InboundMessage) -> tuple[ToolRule, ...]:
    """A group's ``remove_tools`` as a subtract-only rule for its turns."""
    if message.address.conversation.kind is not ConversationKind.GROUP:
        return ()
    settings = policy.groups.get(message.address.conversation.chat)
    if settings is None or not settings.remove_tools:
        return ()
    return (ToolRule(remove=settings.remove_tools, group=message.address.conversation.chat),)


class Dispatcher:
    def __init__(
        self,
        store: DispatchStore,
        outbox: Outbox,
        metrics: Metrics,
        router: Router,
        lanes: Lanes,
        policy_for: Callable[[str, str], AccessPolicy],
        teacher: TeacherHook | None = None,
        authenticates: Callable[[str], bool] = authenticates_senders,
    ) -> None:
        self.outbox = outbox
        self.teacher = teacher
        self.authenticates = authenticates
        """Whether a channel proves who its senders are (its declared capability); only then can one be an owner."""
        self.store = store
        self.metrics = metrics
        self.router = router
        self.lanes = lanes
        self.policy_for = policy_for
        self._queue: asyncio.Queue[tuple[InboundMessage, bool]] = asyncio.Queue()
        self._approved: set[tuple[str, str, str]] = set()
        self._not_approved: dict[tuple[str, str, str], float] = {}
        self._in_hand: set[tuple[str, str, str]] = set()
        """Dedup keys queued here or being dispatched: a resume after a store failure leaves them be."""

    def submit(self, message: InboundMessage, *, recovered: bool = False) -> None:
        """Queue a durable message; ``recovered`` marks one a previous run left unanswered."""
        self._in_hand.add(message.dedup_key)
        self._queue.put_nowait((message, recovered))

    def holds(self, key: tuple[str, str, str]) -> bool:
        """True while the message is queued here or being dispatched."""
        return key in self._in_hand

    @property
    def backlog(self) -> int:
        return self._queue.qsize()

    async def run(self) -> None:
        while True:
            message, recovered = await self._queue.get()
            try:
                await self._dispatch(message, recovered)
            except asyncio.CancelledError:
                raise
            except Exception:
                # The message stays pending in the store; it is dispatched again once the store
                # writes again (gateway.app's resume) or at the next start.
                log.exception("dispatch failed platform=%s event=%s", message.address.channel, message.event_id)
            finally:
                self._in_hand.discard(message.dedup_key)

    async def _dispatch(self, message: InboundMessage, recovered: bool) -> None:
        address = message.address
        if message.from_self:
            await self._drop(message, "own message")
            return
        if _says_nothing(message):
            await self._drop(message, NOTHING_VISIBLE)
            return
        partner = self.router.route(address)
        if partner is None:
            await self._drop(message, "no partner bound to this account or chat")
            return
        policy = self.policy_for(address.channel, address.account)
        direct = address.conversation.kind is ConversationKind.DIRECT
        approved = direct and await self._is_approved(message)
        decision = decide(message, policy, partner, approved=approved, authenticated=self.authenticates(address.channel))
        match decision.verdict:
            case Verdict.ADMIT:
                if opens_chat(message):
                    await self._greet(message, partner)
                    return
                if self.teacher is not None and await self.teacher.intercept(message, partner, decision.role):
                    return
                rules = _group_rules(policy, message)
                self.lanes.submit(Admitted(message, partner, decision.role, recovered, rules))
            case Verdict.HOLD:
                await self._hold(message, partner, policy)
            case Verdict.DROP:
                await self._drop(message, decision.reason)
                if decision.notify:
                    await self._refusal_notice(message, partner, policy)

    async def _is_approved(self, message: InboundMessage) -> bool:
        """Approvals only ever get added (by the owner), so a yes is cached for good and a
        no for a few seconds -- long enough to spare the store on a burst."""
        key = (message.address.channel, message.address.account, message.sender.user)
        if key in self._approved:
            return True
        now = time.monotonic()
        if self._not_approved.get(key, 0.0) > now:
            return False
        if await self.store.is_approved(*key):
            self._approved.add(key)
            self._not_approved.pop(key, None)
            return True
        if len(self._not_approved) > 10_000:
            self._not_approved = {k: t for k, t in self._not_approved.items() if t > now}
        self._not_approved[key] = now + NEGATIVE_APPROVAL_TTL_S
        return False

    async def _drop(self, message: InboundMessage, reason: str) -> None:
        await self.store.mark_inbound([message.dedup_key], InboundState.DROPPED, reason)
        self.metrics.dropped.labels(message.address.channel, message.address.account, reason).inc()
        log.info("message dropped platform=%s account=%s event=%s reason=%s",
                 message.address.channel, message.address.account, message.event_id, reason)

    async def _hold(self, message: InboundMessage, partner: PartnerConfig, policy: AccessPolicy) -> None:
        address = message.address
        await self.store.mark_inbound([message.dedup_key], InboundState.HELD, "waiting for pairing approval")
        # A channel that knows where senders are (web chat: identities are free to make) bounds codes per
        # source, so a few made-up sessions cannot lock every new learner out; the account keeps a wide cap.
        request = await self.store.pairing_request(
            address.channel, address.account, message.sender.user, message.sender.display_name,
            policy.pairing_ttl_s, policy.pairing_max_pending, source=message.source,
            max_account=policy.pairing_max_pending * PAIRING_SOURCES if message.source else None,
        )
        log.info("message held for pairing platform=%s account=%s sender=%s code_issued=%s",
                 address.channel, address.account, message.sender.user, request is not None)
        if request is None:
            # Too many codes pending: say nothing new (a flood of strangers must not flood the owner).
            return
        if await self.store.notice_due(address.channel, address.account, message.sender.user, policy.refusal.min_interval_s):
            language = language_for(partner.languages, message.sender.locale)
            text = say(Phrase.PAIRING_NOTICE, language, partner=partner.name, code=request.code)
            await self._notice(message, text, purpose=f"pairing:{request.code}", language=language)

    async def _refusal_notice(self, message: InboundMessage, partner: PartnerConfig, policy: AccessPolicy) -> None:
        if not policy.refusal.notify:
            return
        address = message.address
        if await self.store.notice_due(address.channel, address.account, message.sender.user, policy.refusal.min_interval_s):
            language = language_for(partner.languages, message.sender.locale)
            text = policy.refusal.text or say(Phrase.REFUSAL, language)
            await self._notice(message, text, purpose="refusal", language=language)

    async def _greet(self, message: InboundMessage, partner: PartnerConfig) -> None:
        key = reply_key(message.address, message.event_id, "greeting")
        language = language_for(partner.languages, message.sender.locale)
        greeting = OutboundReply(idempotency_key=key, target=message.address, referrer=message.referrer,
                                 markdown=greeting_of(partner, language), language=language)
        await self.outbox.post(greeting, answered=[message.dedup_key])
        log.info("greeting platform=%s account=%s chat=%s event=%s partner=%s", message.address.channel,
                 message.address.account, message.address.conversation.key, message.event_id, partner.id)

    async def _notice(self, message: InboundMessage, text: str, *, purpose: str, language: str) -> None:
        key = reply_key(message.address, message.event_id, purpose)
        notice = OutboundReply(idempotency_key=key, target=message.address, referrer=message.referrer, markdown=text,
                               language=language, author=ReplyAuthor.GATEWAY)
        await self.outbox.post(notice)

    async def release_approved(self) -> int:
        """Answer held messages of senders the owner approved (the CLI may run in another process)."""
        released = await self.store.release_approved()
        for item in released:
            address = item.message.address
            key = (address.channel, address.account, item.message.sender.user)
            self._approved.add(key)
            self._not_approved.pop(key, None)
            self.submit(item.message)
        return len(released)
