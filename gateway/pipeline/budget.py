"""What a platform takes of one reply: its message budget and its file size limit, enforced once.

Two declared facts cap a reply before it is sent, on every channel alike:

- ``replies_per_inbound``: QQ's official API takes five messages in answer to
  one message, personal WeChat about ten before its context token goes stale.
  The budget is the learner message's, shared by every reply that answers it
  (the answer, a teacher's words in a takeover, a notice): a reply gets what
  the others already sent left of it (``Store.parts_answering``).
  A reply that would take more is first merged: adjacent text parts are
  joined wherever the join still fits the text limit, and files over the
  budget that have a URL become links in the last text part kept.  What
  still does not fit is left out, in order from the end, and *recorded*: the
  reason lands on the outbox row, in ``/status`` and in
  ``partners_parts_left_out``, and the partner's teacher is told (the
  learner already has the first parts; the teacher can send the rest).
- ``media_max_bytes``: a file over the platform's limit is not attached.  By
  the degradation rules of :mod:`gateway.render.degrade` it becomes a link to
  its URL in the text; a file known only by its path becomes "[kind: name]"
  in the text, and since its content is lost that is recorded and told like
  a part left out.

Both are pure functions of the reply and the declaration, so a delivery
resumed after a crash computes the same parts and continues where it was.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from gateway.core.capabilities import ChannelCapabilities
from gateway.core.messages import Attachment, Element, Link, Media, OutboundReply, RenderedPart, plain_text
from gateway.render import degrade, measure, render_markdown

log = logging.getLogger(__name__)

JOIN = "\n\n"
"""Between two text parts joined into one: the break the renderer puts between blocks."""


@dataclass(frozen=True)
class Fitted:
    """The parts to send, and why some of what the reply held will not arrive (empty: all of it will)."""

    parts: list[RenderedPart]
    left_out: str = ""


def messages_of(parts: list[RenderedPart]) -> int:
    """How many platform messages ``parts`` take: one per text, one per file (files go as messages of their own)."""
    return sum((1 if part.text else 0) + len(part.attachments) for part in parts)


def size_of(attachment: Attachment) -> int | None:
    """The file's size in bytes where it can be known before sending (a local file), else None."""
    if not attachment.path:
        return None
    try:
        return os.stat(attachment.path).st_size
    except OSError:
        return None  # unreadable: the channel's send says so, as a dead letter with the reason


def _name(attachment: Attachment) -> str:
    return attachment.name or (attachment.path or attachment.url or "").rstrip("/").rsplit("/", 1)[-1]


def _as_markdown(element: Element) -> str:
    if isinstance(element, Link):
        label = (element.text or element.url).replace("[", "\\[").replace("]", "\\]")
        return f"[{label}]({element.url})"
    return plain_text([element])


def _degraded(attachments: list[Attachment], capabilities: ChannelCapabilities) -> list[str]:
    """The attachments as the degradation rules write them where the platform cannot carry them."""
    media = [Media(kind=a.kind, url=a.url, name=_name(a)) for a in attachments]
    without = capabilities.model_copy(update={"elements": capabilities.elements - {a.kind for a in attachments}})
    return [_as_markdown(element) for element in degrade(media, without)]


def within_size(reply: OutboundReply, capabilities: ChannelCapabilities) -> tuple[OutboundReply, str]:
    """``reply`` with every file over the platform's size limit moved into its text, and what that loses.

    Only files the platform would carry are measured (the others degrade by kind anyway) and only
    local files have a size to measure; a file by URL is fetched by the platform, which refuses it
    itself if it must."""
    limit = capabilities.media_max_bytes
    over = [(a, size) for a in reply.attachments
            if a.kind in capabilities.media_kinds and (size := size_of(a)) is not None and size > limit]
    if not over:
        return reply, ""
    too_big = [a for a, _ in over]
    lines = _degraded(too_big, capabilities)
    markdown = JOIN.join(filter(None, [reply.markdown.rstrip(), *lines]))
    kept = tuple(a for a in reply.attachments if a not in too_big)
    for attachment, size in over:
        log.info("attachment over the size limit platform=%s reply=%s name=%s bytes=%d limit=%d becomes=%s",
                 capabilities.platform, reply.idempotency_key, _name(attachment), size, limit,
                 "link" if attachment.url else "name")
    lost = [f"{_name(a)} ({size} bytes)" for a, size in over if not a.url]
    reason = (f"not attached, over {capabilities.platform}'s {limit}-byte file limit: {', '.join(lost)}" if lost else "")
    return reply.model_copy(update={"markdown": markdown, "attachments": kept}), reason


def _joined(parts: list[RenderedPart], capabilities: ChannelCapabilities) -> list[RenderedPart]:
    """Adjacent text parts joined wherever the join fits the text limit (files stay where they are)."""
    out: list[RenderedPart] = []
    for part in parts:
        previous = out[-1] if out else None
        if previous is not None and previous.text and part.text and not previous.attachments and not part.attachments:
            joined = previous.text + JOIN + part.text
            if measure(joined, capabilities.text_unit) <= capabilities.text_limit:
                out[-1] = previous.model_copy(update={"text": joined, "final": previous.final and part.final})
                continue
        out.append(part)
    return out


def _with_links(part: RenderedPart, files: list[Attachment], capabilities: ChannelCapabilities) -> tuple[RenderedPart, list[Attachment]]:
    """``part`` with links to as many of ``files`` (those with a URL) as its text limit leaves room for."""
    rest: list[Attachment] = []
    for attachment in files:
        link = render_markdown(_degraded([attachment], capabilities)[0], capabilities.dialect) if attachment.url else ""
        text = part.text + JOIN + link if link else ""
        if link and measure(text, capabilities.text_unit) <= capabilities.text_limit:
            part = part.model_copy(update={"text": text})
        else:
            rest.append(attachment)
    return part, rest


def fit_budget(parts: list[RenderedPart], capabilities: ChannelCapabilities, *, already: int = 0) -> Fitted:
    """``parts`` within the platform's messages per inbound message: merged where they can be, cut where not.

    The budget belongs to the learner's message, not to one reply: what other replies to the
    same message (a teacher's words, a notice, an earlier answer) took of it: ``already``.  With nothing left, no part
    is kept and the reason says so."""
    if capabilities.replies_per_inbound is None:
        return Fitted(parts)
    budget = max(0, capabilities.replies_per_inbound - already)
    total = messages_of(parts)
    if total <= budget:
        return Fitted(parts)
    merged = _joined(parts, capabilities)
    kept: list[RenderedPart] = []
    spent = 0
    left: list[Attachment] = []
    dropped_texts = 0
    for part in merged:
        room = budget - spent
        text_cost = 1 if part.text else 0
        if text_cost > room:
            dropped_texts += text_cost
            left.extend(part.attachments)
            continue
        files = part.attachments[: room - text_cost]
        left.extend(part.attachments[room - text_cost :])
        if part.text or files:
            kept.append(part.model_copy(update={"attachments": files}))
        spent += text_cost + len(files)
    last_text = max((i for i, p in enumerate(kept) if p.text), default=None)
    if left and last_text is not None:
        kept[last_text], left = _with_links(kept[last_text], left, capabilities)
    kept = [part.model_copy(update={"index": i}) for i, part in enumerate(kept)]
    if not dropped_texts and not left:
        return Fitted(kept)
    what = []
    if dropped_texts:
        what.append(f"{dropped_texts} of {sum(1 for p in merged if p.text)} text parts")
    if left:
        what.append("files " + ", ".join(_name(a) for a in left))
    taken = f", {already} of them already sent," if already else ""
    reason = (f"{' and '.join(what)} left out: {capabilities.platform} takes {capabilities.replies_per_inbound} messages "
              f"in answer to one message{taken} and the reply needed {messages_of(merged)}")
    return Fitted(kept, reason)
