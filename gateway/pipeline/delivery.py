"""Delivery: from a durable outbox row to messages on the platform, exactly once.

One path for every channel.  It renders the reply's Markdown once into the
channel's dialect, splits it in the channel's unit, paces each part through
the channel's token buckets, sends (or, for part 0 of a streamed reply, edits
the preview already on screen), and records progress after each part, so a
resumed delivery continues with the next part instead of starting over.

A reply with nothing visible to send (empty, or only control, format or
whitespace characters once rendered) is never marked delivered with nothing
sent: it goes out as :data:`APOLOGY`, on every channel alike, so the learner
is not left waiting for an answer that silently never comes.

Every send carries ``{reply key}:{part}`` as its idempotency key -- the same
on every retry and after every restart -- for platforms that deduplicate.
Transient errors retry with backoff (``retry_after`` for 429s); permanent
ones and exhausted attempts end in a dead letter with the reason recorded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone

from channels.base import Channel
from gateway.capabilities import ChannelCapabilities, EditMode
from gateway.errors import ReplyWindowClosed
from gateway.messages import Address, ConversationKind, Element, Link, Media, OutboundReply, RenderedPart, plain_text
from gateway.metrics import Metrics
from gateway.pacing import Pacer, RetryPolicy
from gateway.render import degrade, render_reply
from gateway.store import OutboxItem, ReplyState, Store

log = logging.getLogger(__name__)

APOLOGY = "Sorry, something went wrong on my side while answering. Please send your message again."
"""What a learner gets instead of an answer with nothing in it (an empty or failed turn)."""


@dataclass
class Outlet:
    """A running channel account as the outbound path sees it."""

    channel: Channel
    capabilities: ChannelCapabilities
    pacer: Pacer
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    @property
    def labels(self) -> tuple[str, str]:
        return (self.capabilities.platform, self.channel.account)


def chat_key(target: Address) -> str:
    return target.conversation.key


def is_group(target: Address) -> bool:
    return target.conversation.kind is ConversationKind.GROUP


def render_parts(reply: OutboundReply, capabilities: ChannelCapabilities) -> list[RenderedPart]:
    """Render a reply into parts; attachments the platform cannot carry degrade to links in the text.

    Never empty: a reply with nothing visible and no attachment becomes :data:`APOLOGY`."""
    carried = tuple(a for a in reply.attachments if a.kind in capabilities.media_kinds)
    markdown = reply.markdown
    dropped = [a for a in reply.attachments if a not in carried]
    if dropped:
        media = [Media(kind=a.kind, url=a.url, name=a.name or (a.path or "").rsplit("/", 1)[-1]) for a in dropped]
        cannot_carry = capabilities.model_copy(update={"elements": capabilities.elements - {a.kind for a in dropped}})
        lines = [_as_markdown(element) for element in degrade(media, cannot_carry)]
        markdown = "\n\n".join(filter(None, [markdown.rstrip(), *lines]))
    texts = render_reply(markdown, capabilities)
    if not texts:
        texts = [""] if carried else render_reply(APOLOGY, capabilities)
    parts = [RenderedPart(index=i, text=t) for i, t in enumerate(texts)]
    if parts and carried:
        parts[-1] = parts[-1].model_copy(update={"attachments": carried})
    return parts


def _as_markdown(element: Element) -> str:
    if isinstance(element, Link):
        label = (element.text or element.url).replace("[", "\\[").replace("]", "\\]")
        return f"[{label}]({element.url})"
    return plain_text([element])


def window_closed(reply: OutboundReply, capabilities: ChannelCapabilities, first_received: datetime | None) -> str | None:
    """Why a reply can no longer be sent, or None.  Checked before each send, not after a platform error."""
    now = datetime.now(timezone.utc)
    if reply.referrer.expires_at is not None and now > reply.referrer.expires_at:
        return "the platform's reply token expired"
    window = capabilities.group_reply_window_s if is_group(reply.target) else None
    window = window or capabilities.reply_window_s
    if window is not None and first_received is not None and (now - first_received).total_seconds() > window:
        return f"the platform's reply window of {window:g} s has closed"
    return None


class Delivery:
    def __init__(self, store: Store, metrics: Metrics) -> None:
        self.store = store
        self.metrics = metrics

    async def deliver(
        self, key: str, outlet: Outlet, *, first_received: datetime | None = None, item: OutboxItem | None = None
    ) -> ReplyState:
        """Send what is left of one reply.  Returns its final state; cancellation leaves it open.

        ``item`` is the row as just written, when the caller has it (saves a read)."""
        item = item or await self.store.get_reply(key)
        if item is None or item.state in (ReplyState.DELIVERED, ReplyState.FAILED):
            return item.state if item else ReplyState.FAILED
        parts = render_parts(item.reply, outlet.capabilities)
        return await self._send_parts(item, parts, outlet, first_received)

    async def _send_parts(
        self, item: OutboxItem, parts: list[RenderedPart], outlet: Outlet, first_received: datetime | None
    ) -> ReplyState:
        reply, key = item.reply, item.reply.idempotency_key
        channel, caps = outlet.channel, outlet.capabilities
        target, chat, group = reply.target, chat_key(reply.target), is_group(reply.target)
        attempts = item.attempts
        index = item.parts_sent
        while index < len(parts):
            closed = window_closed(reply, caps, first_received)
            if closed:
                return await self._dead_letter(key, outlet, ReplyWindowClosed(caps.platform, closed))
            part = parts[index]
            last = index == len(parts) - 1
            try:
                async with outlet.pacer.slot(chat, group):
                    editable = index == 0 and caps.edit_mode is not EditMode.NONE
                    if editable and item.preview is not None:
                        await channel.edit(target, item.preview, part, final=True)
                        sent_id = None
                    elif editable and item.preview_unconfirmed:
                        # A preview may be on screen without us knowing its id: send under the
                        # preview's key (a deduplicating platform hands back that message), then
                        # make sure it shows the final text.
                        preview = await channel.send(target, part, referrer=reply.referrer, idempotency_key=f"{key}:p")
                        await channel.edit(target, preview.message, part, final=True)
                        sent_id = preview.message
                    else:
                        sent = await channel.send(target, part, referrer=reply.referrer, idempotency_key=f"{key}:{index}")
                        sent_id = sent.message
            except asyncio.CancelledError:
                raise
            except Exception as error:
                attempts = await self.store.record_attempt(key, str(error))
                self.metrics.errors.labels(*outlet.labels, type(error).__name__).inc()
                delay = outlet.retry.delay_for(attempts, error)
                if delay is None:
                    return await self._dead_letter(key, outlet, error)
                log.warning("send failed platform=%s account=%s reply=%s attempt=%d retry_in=%.2fs error=%s",
                            *outlet.labels, key, attempts, delay, error)
                await asyncio.sleep(delay)
                continue
            index += 1
            await self.store.record_part(key, index, sent_id, delivered=last)
            self.metrics.messages_out.labels(*outlet.labels).inc()
        if first_received is not None:
            elapsed = time.time() - first_received.timestamp()
            self.metrics.send_latency.labels(*outlet.labels).observe(max(0.0, elapsed))
        log.info("reply delivered platform=%s account=%s chat=%s reply=%s parts=%d", *outlet.labels, chat, key, len(parts))
        return ReplyState.DELIVERED

    async def _dead_letter(self, key: str, outlet: Outlet, error: Exception) -> ReplyState:
        await self.store.finish_reply(key, ReplyState.FAILED, str(error))
        self.metrics.dead_letters.labels(*outlet.labels).inc()
        log.error("reply given up platform=%s account=%s reply=%s reason=%s", *outlet.labels, key, error)
        return ReplyState.FAILED
