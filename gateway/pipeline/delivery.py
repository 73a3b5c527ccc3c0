"""Delivery: from a durable outbox row to messages on the platform, exactly once.

One path for every channel.  It renders the reply's Markdown once into the
channel's dialect and its plain twin, splits it in the channel's unit, makes
each attachment a part of its own, paces each part through the channel's
token buckets, sends (or, for part 0 of a streamed reply, edits the preview or
finishes the native stream already on screen), and records progress after
each part -- attachment parts included -- so a resumed delivery continues
with the next part instead of starting over.

A reply with nothing visible to send (empty, or only control, format or
whitespace characters once rendered) is never marked delivered with nothing
sent: it goes out as the catalogue's delivery apology, on every channel alike,
so the learner is not left waiting for an answer that silently never comes --
in the reply's ``language``, or (a row that does not say) the language of the
partner bound to the conversation (:data:`LanguageOf`), never English by accident.

Every send carries its part's key (:func:`gateway.pipeline.outbox.part_key`)
as its idempotency key -- the same on every retry and after every restart --
for platforms that deduplicate.
Transient errors retry with backoff (``retry_after`` for 429s); permanent
ones and exhausted attempts end in a dead letter with the reason recorded.
What the platform takes -- its reply window (:mod:`.windows`), its messages per
inbound message and its file size limit (:mod:`.budget`) -- is decided there,
once; a reply sent short is recorded and its teacher told.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from channels.base import Channel
from gateway.core.capabilities import ChannelCapabilities, EditMode
from gateway.core.errors import ReplyWindowClosed
from gateway.core.messages import (
    Address,
    ConversationKind,
    Element,
    Link,
    Media,
    MessageId,
    OutboundReply,
    RenderedPart,
    StreamHandle,
    plain_text,
)
from gateway.core.phrases import ENGLISH, Phrase, say
from gateway.metrics import Metrics
from gateway.pacing import Pacer, RetryPolicy
from gateway.pipeline.budget import fit_budget, within_size
from gateway.pipeline.outbox import part_key, stream_key
from gateway.pipeline.undelivered import Undelivered
from gateway.pipeline.windows import reply_window, unasked, why_closed
from gateway.render import degrade, render_twins
from gateway.store import InboxStore, OutboxItem, OutboxStore, ReplyState


class DeliveryStore(OutboxStore, InboxStore, Protocol):
    """What delivery uses of the store: the outbox's progress, and when a conversation last spoke (reply windows)."""

log = logging.getLogger(__name__)

APOLOGY = say(Phrase.DELIVERY_APOLOGY, ENGLISH)
"""What a learner gets instead of an answer with nothing in it (an empty or failed turn), in English;
a reply says it in its own ``language`` (:func:`render_parts`)."""

LanguageOf = Callable[[Address], str]
"""The language of the partner bound to a conversation: what a reply that does not know its own speaks."""


class SendGate:
    """At most one send per account whose message the platform may have posted but the outbox has not recorded.

    On a platform that takes no idempotency key (Telegram, email) a SIGKILL between
    "the platform posted it" and "the outbox committed its mark" repeats that message
    after the restart: nothing can tell the resumed delivery it went out.  Lanes send
    concurrently, so without the gate every conversation with a send on the wire is
    such a message -- several per kill.  Held from the send to the committed mark
    (after the pacer's tokens, so a slow chat holds nobody up), it bounds the repeats
    of a kill to one per account.  Platforms that recognise a repeated key do not
    need it and pass straight through (``ChannelCapabilities.idempotent_sends``).
    """

    def __init__(self, serial: bool) -> None:
        self._lock = asyncio.Lock() if serial else None

    @asynccontextmanager
    async def unrecorded(self) -> AsyncIterator[None]:
        if self._lock is None:
            yield
            return
        async with self._lock:
            yield


@dataclass
class Outlet:
    """A running channel account as the outbound path sees it."""

    channel: Channel
    capabilities: ChannelCapabilities
    pacer: Pacer
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    gate: SendGate = field(init=False)

    def __post_init__(self) -> None:
        self.gate = SendGate(serial=not self.capabilities.idempotent_sends)

    @property
    def labels(self) -> tuple[str, str]:
        return (self.capabilities.platform, self.channel.account)


def chat_key(target: Address) -> str:
    return target.conversation.key


def is_group(target: Address) -> bool:
    return target.conversation.kind is ConversationKind.GROUP


def render_parts(reply: OutboundReply, capabilities: ChannelCapabilities) -> list[RenderedPart]:
    """Render a reply into parts: its text parts, then one part per attachment the platform carries.

    Attachments the platform cannot carry degrade to links in the text.  On a platform that carries
    files inside the text message (``media_with_text``: email) they ride with the last text part.
    Never empty: a reply with nothing visible and no attachment becomes the delivery apology, in the
    reply's ``language`` (English when it has none)."""
    carried = tuple(a for a in reply.attachments if a.kind in capabilities.media_kinds)
    markdown = reply.markdown
    dropped = [a for a in reply.attachments if a not in carried]
    if dropped:
        media = [Media(kind=a.kind, url=a.url, name=a.name or (a.path or "").rsplit("/", 1)[-1]) for a in dropped]
        cannot_carry = capabilities.model_copy(update={"elements": capabilities.elements - {a.kind for a in dropped}})
        lines = [_as_markdown(element) for element in degrade(media, cannot_carry)]
        markdown = "\n\n".join(filter(None, [markdown.rstrip(), *lines]))
    twins = render_twins(markdown, capabilities)
    if not twins and not carried:
        twins = render_twins(say(Phrase.DELIVERY_APOLOGY, reply.language or ENGLISH), capabilities)
    parts = [RenderedPart(index=i, text=t.text, plain=t.plain) for i, t in enumerate(twins)]
    if capabilities.media_with_text and carried:
        if not parts:
            parts = [RenderedPart(index=0, text="")]
        parts[-1] = parts[-1].model_copy(update={"attachments": carried})
        return parts
    parts += [RenderedPart(index=len(parts) + n, text="", attachments=(a,)) for n, a in enumerate(carried)]
    return parts


def _as_markdown(element: Element) -> str:
    if isinstance(element, Link):
        label = (element.text or element.url).replace("[", "\\[").replace("]", "\\]")
        return f"[{label}]({element.url})"
    return plain_text([element])


ShortfallNotice = Callable[[OutboundReply, str], Awaitable[None]]
"""Tells a reply's teacher what of it could not be sent, and why."""


class Delivery:
    def __init__(
        self, store: DeliveryStore, metrics: Metrics, on_shortfall: ShortfallNotice | None = None, language_of: LanguageOf | None = None
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.on_shortfall = on_shortfall
        self.language_of = language_of
        """Asked for the language of a reply that carries none (a reminder; a row from before replies said)."""
        self.undelivered = Undelivered()
        """Dead letters and replies sent short, per account since start (``/status``)."""

    async def deliver(
        self, key: str, outlet: Outlet, *, first_received: datetime | None = None, item: OutboxItem | None = None
    ) -> ReplyState:
        """Send what is left of one reply.  Returns its final state; cancellation leaves it open.

        ``item`` is the row as just written, when the caller has it (saves a read)."""
        item = item or await self.store.get_reply(key)
        if item is None or item.state in (ReplyState.DELIVERED, ReplyState.FAILED):
            return item.state if item else ReplyState.FAILED
        caps = outlet.capabilities
        reply, lost = within_size(self._with_language(item.reply), caps)
        fitted = fit_budget(render_parts(reply, caps), caps, already=await self._spent_before(item, caps))
        short = "; ".join(filter(None, [lost, fitted.left_out]))
        if short and item.parts_sent == 0:
            await self._sent_short(item, outlet, short)
        if not fitted.parts:  # the learner's message has had all the replies the platform takes
            await self.store.finish_reply(item.reply.idempotency_key, ReplyState.FAILED, short)
            return ReplyState.FAILED
        return await self._send_parts(item, fitted.parts, outlet, first_received)

    async def _spent_before(self, item: OutboxItem, caps: ChannelCapabilities) -> int:
        """What other replies to the same learner message took of the platform's budget per inbound message.

        Replies to one conversation go one at a time, so by the time this one starts the others' counts
        are final, and a delivery resumed after a crash computes the same parts as the first try."""
        message = item.reply.referrer.message
        if caps.replies_per_inbound is None or message is None:
            return 0
        return await self.store.parts_answering(item.reply.target.conversation_key, message,
                                                besides=item.reply.idempotency_key)

    def _with_language(self, reply: OutboundReply) -> OutboundReply:
        """``reply`` with the language its apology would speak: its own, else its partner's."""
        if reply.language or self.language_of is None:
            return reply
        return reply.model_copy(update={"language": self.language_of(reply.target)})

    async def _sent_short(self, item: OutboxItem, outlet: Outlet, reason: str) -> None:
        """Record, count and tell the teacher that this reply goes out without all it held (once, before part 0)."""
        key = item.reply.idempotency_key
        await self.store.finish_reply(key, item.state, reason)
        self.metrics.replies_short.labels(*outlet.labels).inc()
        self.undelivered.note(*outlet.labels, reason)
        log.warning("reply sent short platform=%s account=%s reply=%s reason=%s", *outlet.labels, key, reason)
        if self.on_shortfall is not None:
            await self.on_shortfall(item.reply, reason)

    async def _window_opened(self, reply: OutboundReply, caps: ChannelCapabilities, first_received: datetime | None) -> float | None:
        """When the learner's message that opens this reply's window arrived (the one answered, else the latest)."""
        if first_received is not None:
            return first_received.timestamp()
        if reply_window(caps, reply.target) is None:
            return None
        return await self.store.last_inbound_at(reply.target.conversation_key)

    async def _send_parts(
        self, item: OutboxItem, parts: list[RenderedPart], outlet: Outlet, first_received: datetime | None
    ) -> ReplyState:
        reply, key, caps = item.reply, item.reply.idempotency_key, outlet.capabilities
        chat, group = chat_key(reply.target), is_group(reply.target)
        attempts = item.attempts
        index = item.parts_sent
        opened = await self._window_opened(reply, caps, first_received)
        while index < len(parts):
            closed = why_closed(caps, reply.target, at=time.time(), opened=opened, proactive=unasked(reply),
                                expires_at=reply.referrer.expires_at)
            if closed:
                return await self._dead_letter(key, outlet, ReplyWindowClosed(caps.platform, closed))
            part = parts[index]
            last = index == len(parts) - 1
            sent = False
            try:
                # The gate is taken inside the pacer's slot, so a send waiting for its chat's
                # tokens holds no other chat up, and a 429 still reaches the slot's bucket.
                async with outlet.pacer.slot(chat, group), outlet.gate.unrecorded():
                    sent_id = await self._put(item, part, outlet)
                    sent = True
                    await self.store.record_part(key, index + 1, sent_id, delivered=last)
                index += 1
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if sent:
                    raise  # the store failed, not the send: a retry would post the part again
                attempts = await self.store.record_attempt(key, str(error))
                self.metrics.errors.labels(*outlet.labels, type(error).__name__).inc()
                delay = outlet.retry.delay_for(attempts, error)
                if delay is None:
                    return await self._dead_letter(key, outlet, error)
                log.warning("send failed platform=%s account=%s reply=%s attempt=%d retry_in=%.2fs error=%s",
                            *outlet.labels, key, attempts, delay, error)
                await asyncio.sleep(delay)
                # The failed step may have left something recorded (a preview opened before its
                # edit failed): the retry starts from the row as it now is, not as it was read.
                item = await self.store.get_reply(key) or item
                continue
            self.metrics.messages_out.labels(*outlet.labels).inc()
        if first_received is not None:
            elapsed = time.time() - first_received.timestamp()
            self.metrics.send_latency.labels(*outlet.labels).observe(max(0.0, elapsed))
        log.info("reply delivered platform=%s account=%s chat=%s reply=%s parts=%d", *outlet.labels, chat, key, len(parts))
        return ReplyState.DELIVERED

    async def _put(self, item: OutboxItem, part: RenderedPart, outlet: Outlet) -> MessageId | None:
        """Show one part: for part 0 of a streamed reply, edit the preview into it or finish the stream
        (see :meth:`_show_streamed`); any other part is sent.

        Returns the id of a message it created, None when it edited one already recorded."""
        reply, channel = item.reply, outlet.channel
        if part.index == 0 and part.attachment is None:
            mode = channel.stream_mode(reply.target)
            if mode is not EditMode.NONE and (item.preview is not None or item.preview_unconfirmed):
                return await self._show_streamed(item, part, outlet, mode)
        key = part_key(reply.idempotency_key, part.index)
        sent = await channel.send(reply.target, part, referrer=reply.referrer, idempotency_key=key)
        return sent.message

    async def _show_streamed(self, item: OutboxItem, part: RenderedPart, outlet: Outlet, mode: EditMode) -> MessageId | None:
        """Turn what was shown while the reply was written into its first part.

        A preview or stream may be on screen without us knowing its handle (a crash, a lost
        response): it is opened again under the same stream key -- a deduplicating platform hands
        back the same message -- and then made to show the final text.  The handle of one opened here
        is recorded before that last step: should the finish or the edit fail, its retry finishes
        this one instead of opening another -- on a platform without idempotency keys, a second
        message the learner would see twice."""
        reply, channel, key = item.reply, outlet.channel, stream_key(item.reply.idempotency_key)
        if mode is EditMode.NATIVE_STREAM:
            if item.preview is not None:
                stream = StreamHandle(target=reply.target, referrer=reply.referrer, handle=item.preview)
            else:
                stream = await channel.start(reply.target, reply.referrer, key)
                await self.store.record_preview(reply.idempotency_key, stream.handle)
            return (await channel.finish(stream, part)).message
        if item.preview is not None:
            await channel.edit(reply.target, item.preview, part, referrer=reply.referrer)
            return None
        preview = await channel.send(reply.target, part, referrer=reply.referrer, idempotency_key=key)
        await self.store.record_preview(reply.idempotency_key, preview.ref)
        await channel.edit(reply.target, preview.ref, part, referrer=reply.referrer)
        return preview.message

    async def _dead_letter(self, key: str, outlet: Outlet, error: Exception) -> ReplyState:
        await self.store.finish_reply(key, ReplyState.FAILED, str(error))
        self.metrics.dead_letters.labels(*outlet.labels).inc()
        self.undelivered.note(*outlet.labels, f"given up: {error}")
        log.error("reply given up platform=%s account=%s reply=%s reason=%s", *outlet.labels, key, error)
        if isinstance(error, ReplyWindowClosed) and self.on_shortfall is not None:
            # The learner was not answered at all, for a rule of the platform's: their teacher hears it.
            item = await self.store.get_reply(key)
            if item is not None:
                await self.on_shortfall(item.reply, f"nothing was sent: {error}")
        return ReplyState.FAILED
