"""The web chat's HTTP surface, mounted by the gateway under ``/channels/webchat/{account}``.

``GET /``                the page; ``GET /static/...`` its script and styles
``POST /api/messages``   ``{session, message_id, text}`` -> 202 ``{"accepted": true}``
``GET /api/events``      Server-Sent Events for ``?session=...``

The POST answers 202 only after the sink accepted the message, which is when
it is durable.  Until the page sees a 2xx it retries with the same
``message_id``; the pipeline deduplicates on it, so a reload or a network
blip neither loses nor doubles a message.  A 4xx is final: the page shows it.

The event stream (one JSON object per ``data:`` line)::

    id: 1733000000000123
    event: message
    data: {"id": "<message id>", "html": "<p>…</p>", "final": false}

    id: 1733000000000124
    event: typing
    data: {}

A ``message`` with an id the page already shows replaces that bubble's
content (that is how a streamed preview grows); ``final`` is false while it
still grows.  ``attachments`` (``[{kind, url, name}]``) appears when a reply
carries web links to media.  A ``: keep-alive`` comment comes every 15 s.  A
reconnecting page sends ``Last-Event-ID`` (or ``?last_event_id=`` after a
reload) and gets what it missed from the session's backlog.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from channels.webchat.feed import FeedsFull
from gateway.errors import InvalidEvent
from gateway.jsonbody import decode_json
from gateway.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    Sender,
    Text,
    UserId,
)

if TYPE_CHECKING:  # pragma: no cover - typing only
    from channels.webchat.channel import WebchatChannel

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
KEEPALIVE_S = 15.0
RECONNECT_MS = 2000
LEARNER_NAME = "Web learner"
_ID_CHARS = r"[A-Za-z0-9_-]{1,100}"
_ID_RULE = "must be 1-100 characters of letters, digits, '_' or '-'"
_PAGE_HEADERS = {
    # Defence in depth for the innerHTML in app.js: no inline script, nothing from elsewhere.
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' https: http: data:; media-src 'self' https: http:; "
        "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class PostedMessage(BaseModel):
    """What the page POSTs: one learner message, identified by an id the page chose."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    session: str = Field(pattern=f"^{_ID_CHARS}$")
    message_id: str = Field(pattern=f"^{_ID_CHARS}$")
    text: str


def webchat_routes(channel: WebchatChannel) -> list[BaseRoute]:
    api = WebchatApi(channel)
    return [
        Route("/", api.page),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR)),
        Route("/api/messages", api.post_message, methods=["POST"]),
        Route("/api/events", api.events),
    ]


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class WebchatApi:
    def __init__(self, channel: WebchatChannel) -> None:
        self.channel = channel
        self.settings = channel.settings
        # Enough for the longest text even if every character arrives as a 12-byte \ud83d\ude00 escape.
        self.max_body_bytes = self.settings.max_text_chars * 12 + 1024
        self._page = self._render_page()

    def _render_page(self) -> str:
        template = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
        return template.replace("{{title}}", html.escape(self.channel.title)).replace(
            "{{max_text_chars}}", str(self.settings.max_text_chars)
        )

    async def page(self, request: Request) -> Response:
        return HTMLResponse(self._page, headers=_PAGE_HEADERS)

    async def post_message(self, request: Request) -> Response:
        body = await self._read_body(request)
        if isinstance(body, Response):
            return body
        try:
            posted = PostedMessage.model_validate(decode_json(body))
        except InvalidEvent:  # not JSON, not UTF-8 or nested too deeply: the page never sends such a body
            return _error(400, _NOT_AN_OBJECT)
        except ValidationError as error:
            return _error(400, _describe(error))
        if not posted.text.strip():
            return _error(400, "text: the message is empty")
        limit = self.settings.max_text_chars
        if len(posted.text) > limit:
            return _error(413, f"text: the message has {len(posted.text)} characters; the limit is {limit}")
        message = self._inbound(posted)
        try:
            await self.channel.context.sink.accept([message])
        except Exception:
            log.exception("webchat accept failed account=%s session=%s message=%s",
                          self.channel.account, posted.session, posted.message_id)
            return _error(503, "the message could not be stored; the page will try again", {"Retry-After": "1"})
        log.info("webchat message in account=%s session=%s message=%s", self.channel.account, posted.session, posted.message_id)
        log.debug("webchat message text account=%s message=%s text=%r", self.channel.account, posted.message_id, posted.text)
        return JSONResponse({"accepted": True}, status_code=202)

    async def _read_body(self, request: Request) -> bytes | Response:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            return _error(413, f"the request body is larger than {self.max_body_bytes} bytes")
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_body_bytes:
                    return _error(413, f"the request body is larger than {self.max_body_bytes} bytes")
                chunks.append(chunk)
        except ClientDisconnect:
            return _error(400, "the request body was cut off")
        return b"".join(chunks)

    def _inbound(self, posted: PostedMessage) -> InboundMessage:
        session = posted.session
        return InboundMessage(
            event_id=EventId(posted.message_id),
            address=Address(
                channel=ChannelName(self.channel.name),
                account=AccountId(self.channel.account),
                conversation=Conversation(chat=ChatId(session), kind=ConversationKind.DIRECT),
            ),
            sender=Sender(user=UserId(session), display_name=LEARNER_NAME),
            elements=(Text(text=posted.text),),
            addressed=True,
            received_at=datetime.now(UTC),
        )

    async def events(self, request: Request) -> Response:
        session = request.query_params.get("session", "")
        if not re.fullmatch(_ID_CHARS, session):
            return _error(400, f"session: {_ID_RULE}")
        feeds = self.channel.feeds
        after = feeds.resume_point(request.headers.get("last-event-id") or request.query_params.get("last_event_id"))
        try:
            feed = feeds.feed(session)
        except FeedsFull:
            log.warning("webchat stream refused account=%s reason=full", self.channel.account)
            return _error(503, "too many open chats; try again shortly", {"Retry-After": "30"})

        async def stream() -> AsyncIterator[bytes]:
            yield f"retry: {RECONNECT_MS}\n\n".encode()
            async for event in feed.follow(after, KEEPALIVE_S):
                yield b": keep-alive\n\n" if event is None else event.encode()

        log.debug("webchat stream opened account=%s session=%s after=%d", self.channel.account, session, after)
        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )


_FIELD_RULES = {"session": _ID_RULE, "message_id": _ID_RULE}
_NOT_AN_OBJECT = "the body must be a JSON object {session, message_id, text}"


def _describe(error: ValidationError) -> str:
    """One readable line for the first problem, e.g. ``message_id: must be 1-100 characters ...``."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "body"
    kind = first["type"]
    if kind in ("json_invalid", "model_type"):
        return _NOT_AN_OBJECT
    if kind == "missing":
        return f"{field}: this field is required"
    if kind == "extra_forbidden":
        return f"{field}: unknown field (send only session, message_id and text)"
    if kind == "string_pattern_mismatch" and field in _FIELD_RULES:
        return f"{field}: {_FIELD_RULES[field]}"
    return f"{field}: {first['msg']}"
