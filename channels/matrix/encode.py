"""Rendered parts -> Matrix event content.  The only module that knows Matrix's message shapes.

A text part is HTML (the renderer's ``Dialect.HTML``): it goes as
``formatted_body`` with ``format: org.matrix.custom.html``, beside a plain
``body`` for clients that show no HTML.  Streaming edits are ``m.replace``
events whose ``m.new_content`` carries the whole new text; their top-level
fallback body is cut short, because the full text already rides in
``m.new_content`` and the whole event must stay under 65,536 bytes.

Relations: in a thread every part carries ``rel_type: m.thread`` with the
reply fallback Matrix asks for (``is_falling_back``); in a group room the
first part is a rich reply (``m.in_reply_to``) to the message it answers, so
the asker can tell which question it is; in a direct room a reply needs no
such pointer and gets none.
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

from gateway.core.capabilities import capabilities_of
from gateway.core.messages import Attachment

HTML_FORMAT = "org.matrix.custom.html"
EDIT_FALLBACK_CHARS = 1000
ENVELOPE_BYTES = 5536
"""Room left for what the homeserver adds around the content (ids, origin_server_ts, signatures, hashes)."""
EVENT_BUDGET = (capabilities_of("matrix").payload_max_bytes or 65536) - ENVELOPE_BYTES
"""Bytes of content we allow ourselves under the event limit (``payload_max_bytes`` in platforms.toml)."""
MSGTYPE_OF = {"image": "m.image", "audio": "m.audio", "video": "m.video", "file": "m.file"}
_BLOCKS = {"p", "div", "pre", "blockquote", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "table", "tr"}


class _PlainText(HTMLParser):
    """HTML -> what a text-only client should show: blocks on their own lines, links keep their URL."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._links: list[tuple[str, int]] = []
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._pre += tag == "pre"
        if tag == "br":
            self.out.append("\n")
        elif tag == "li":
            self.out.append("\n- ")
        elif tag in _BLOCKS and self.out:
            self.out.append("\n\n")
        if tag == "a":
            self._links.append((dict(attrs).get("href") or "", len(self.out)))

    def handle_endtag(self, tag: str) -> None:
        self._pre -= tag == "pre" and self._pre > 0
        if tag == "a" and self._links:
            href, start = self._links.pop()
            label = "".join(self.out[start:])
            if href and href != label and not href.startswith("https://matrix.to/"):
                self.out.append(f" ({href})")

    def handle_data(self, data: str) -> None:
        if not self._pre and "\n" in data and not data.strip():
            return  # the renderer's line breaks between blocks; blocks bring their own
        self.out.append(data)


def plain_body(markup: str) -> str:
    parser = _PlainText()
    parser.feed(markup)
    parser.close()
    text = "".join(parser.out)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def relations(*, thread: str | None, reply_to: str | None) -> dict:
    if thread is not None:
        return {"m.relates_to": {"rel_type": "m.thread", "event_id": thread, "is_falling_back": True,
                                 "m.in_reply_to": {"event_id": reply_to or thread}}}
    if reply_to is not None:
        return {"m.relates_to": {"m.in_reply_to": {"event_id": reply_to}}}
    return {}


def _size(content: dict) -> int:
    return len(json.dumps(content, ensure_ascii=False).encode())


def _fitted(content: dict) -> dict:
    """Content whose HTML twin would push the event over the limit goes as plain text alone.

    A part is at most ``text_limit`` bytes, but JSON escaping (every newline and quote) can
    still carry body plus formatted_body past 65,536 bytes; the plain body alone always fits."""
    return content if _size(content) <= EVENT_BUDGET else _plain_only(content)


def _plain_only(content: dict) -> dict:
    return {k: v for k, v in content.items() if k not in ("format", "formatted_body")}


def text_content(markup: str, *, thread: str | None = None, reply_to: str | None = None,
                 mention: str | None = None) -> dict:
    """``mention``: the user the part answers, named in ``m.mentions`` -- with ``m.mentions`` present a
    homeserver highlights only whom it names, so without it the asker in a group is never notified."""
    content = {"msgtype": "m.text", "body": plain_body(markup), "format": HTML_FORMAT, "formatted_body": markup,
               "m.mentions": {"user_ids": [mention]} if mention else {}}
    content.update(relations(thread=thread, reply_to=reply_to))
    return _fitted(content)


def edit_content(original: str, markup: str) -> dict:
    """An ``m.replace`` of ``original`` showing ``markup`` (``m.mentions: {}``: an edit pings nobody again)."""
    fallback = plain_body(markup)
    new = {"msgtype": "m.text", "body": fallback, "format": HTML_FORMAT, "formatted_body": markup,
           "m.mentions": {}}
    if len(fallback) > EDIT_FALLBACK_CHARS:
        fallback = fallback[:EDIT_FALLBACK_CHARS] + "…"
    content = {"msgtype": "m.text", "body": f"* {fallback}", "m.new_content": new,
               "m.relates_to": {"rel_type": "m.replace", "event_id": original}, "m.mentions": {}}
    if _size(content) > EVENT_BUDGET:
        content["m.new_content"] = _plain_only(new)
    return content


def media_content(attachment: Attachment, url: str, *, size: int | None, thread: str | None = None) -> dict:
    """An m.image / m.audio / m.video / m.file event for an uploaded (mxc://) or linked file.

    A linked http(s) file keeps its URL in ``url`` and in the body, so a client that cannot
    fetch it still shows where it is."""
    name = attachment.name or (attachment.path or attachment.url or "file").rstrip("/").rsplit("/", 1)[-1]
    info: dict = {}
    if attachment.mime_type:
        info["mimetype"] = attachment.mime_type
    if size is not None:
        info["size"] = size
    body = name if url.startswith("mxc://") else f"{name}: {url}"
    content = {"msgtype": MSGTYPE_OF[attachment.kind], "body": body, "filename": name, "url": url, "info": info}
    if not url.startswith("mxc://"):
        content["format"] = HTML_FORMAT
        content["formatted_body"] = f'<a href="{html.escape(url, quote=True)}">{html.escape(name)}</a>'
    content.update(relations(thread=thread, reply_to=None))
    return content
