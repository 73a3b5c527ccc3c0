"""The web chat's HTTP surface, mounted by the gateway under ``/channels/webchat/{account}``.

``GET /``                the page; ``GET /static/...`` its script and styles
``POST /api/session``    ``{}`` -> 200 ``{"learner", "new"}``; issues the session cookie when there is none
``POST /api/messages``   ``{message_id, text}`` -> 202 ``{"accepted": true}``
``GET /api/events``      Server-Sent Events for the session in the cookie

The session is the learner's credential and travels only in the
``partners_webchat`` cookie (``HttpOnly``, ``SameSite=Strict``; see
``identity.py``): the page's script never sees it, no URL carries it, no log
line names it.  Behind this module everything speaks of the *learner id*
derived from it.  POSTs must be JSON (else 415), and the gateway refuses them
from another site's page (``gateway.http.hosts``).

The learner's language is the browser's own preference, the ``Accept-Language`` header it sends
with every request (the languages set in the browser, weighted): its highest-weighted tag is kept
with the session when the page starts it, refreshed by each message that carries one, and sent on
as ``Sender.locale``, so the gateway's own notices follow it when the partner speaks it.

The POST answers 202 only after the sink accepted the message, which is when
it is durable.  Until the page sees a 2xx it retries with the same
``message_id``; the pipeline deduplicates on it (per session: the inbound
event id is ``<learner id>.<message id>``), so a reload or a network
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
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from channels.webchat.feed import FeedsFull
from channels.webchat.identity import (
    COOKIE,
    COOKIE_MAX_AGE_S,
    SESSION_RULE,
    new_session,
    well_formed,
)
from gateway.core.errors import InvalidEvent
from gateway.core.messages import (
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
from gateway.http.body import read_limited
from gateway.jsonbody import decode_json
from gateway.languages import preferred_language

if TYPE_CHECKING:  # pragma: no cover - typing only
    from channels.webchat.channel import WebchatChannel

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
KEEPALIVE_S = 15.0
RECONNECT_MS = 2000
LEARNER_NAME = "Web learner"
_ID_CHARS = r"[A-Za-z0-9_-]{1,100}"
_ID_RULE = "must be 1-100 characters of letters, digits, '_' or '-'"
Posted = TypeVar("Posted", bound=BaseModel)
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
    message_id: str = Field(pattern=f"^{_ID_CHARS}$")
    text: str


class SessionAnswer(BaseModel):
    """What ``POST /api/session`` tells the page: who it is (not a secret) and whether it just began."""

    learner: str
    new: bool


def webchat_routes(channel: WebchatChannel) -> list[BaseRoute]:
    api = WebchatApi(channel)
    return [
        Route("/", api.page),
        Mount("/static", app=StaticFiles(directory=STATIC_DIR)),
        Route("/api/session", api.session, methods=["POST"]),
        Route("/api/messages", api.post_message, methods=["POST"]),
        Route("/api/events", api.events),
    ]


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def parse_json(model: type[Posted], body: bytes) -> Posted | Response:
    """The one place a web chat request body is parsed: JSON into ``model``, or a 400 that says why."""
    try:
        return model.model_validate(decode_json(body))
    except InvalidEvent:  # not JSON, not UTF-8 or nested too deeply: the page never sends such a body
        return _error(400, _NOT_AN_OBJECT)
    except ValidationError as error:
        return _error(400, _describe(error))


def _not_json(request: Request) -> Response | None:
    """A 415 unless the body is declared JSON: a form or ``text/plain`` POST is what another site's page can send."""
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type == "application/json":
        return None
    return _error(415, "send the body as JSON, with Content-Type: application/json")


def _session_of(request: Request) -> str | None:
    session = request.cookies.get(COOKIE)
    return session if well_formed(session) else None


def _no_session() -> Response:
    return _error(401, f"no web chat session: open the chat page (its cookie {COOKIE} {SESSION_RULE})")


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

    async def session(self, request: Request) -> Response:
        """The page's first call: keeps the session the cookie names, or starts one and sets the cookie.

        The page, not the page's GET, asks for it: a learner who follows a link from another site
        arrives without the ``SameSite=Strict`` cookie on that navigation, but the page's own
        same-origin request carries it, so the session is kept instead of being replaced.
        """
        refused = _not_json(request)
        if refused is not None:
            return refused
        session = _session_of(request)
        new = session is None
        if session is None:
            session = new_session()
        learner = self.channel.learners.learner(session)
        self._locale(learner, request)
        response = JSONResponse(SessionAnswer(learner=learner, new=new).model_dump(), headers={"Cache-Control": "no-store"})
        if new:
            response.set_cookie(
                COOKIE, session, max_age=COOKIE_MAX_AGE_S, path=_cookie_path(request),
                secure=request.url.scheme == "https", httponly=True, samesite="strict",
            )
            log.info("webchat session started account=%s learner=%s", self.channel.account, learner)
        return response

    async def post_message(self, request: Request) -> Response:
        refused = _not_json(request)
        if refused is not None:
            return refused
        session = _session_of(request)
        if session is None:
            return _no_session()
        body = await self._read_body(request)
        if isinstance(body, Response):
            return body
        posted = parse_json(PostedMessage, body)
        if isinstance(posted, Response):
            return posted
        if not posted.text.strip():
            return _error(400, "text: the message is empty")
        limit = self.settings.max_text_chars
        if len(posted.text) > limit:
            return _error(413, f"text: the message has {len(posted.text)} characters; the limit is {limit}")
        learner = self.channel.learners.learner(session)
        message = self._inbound(learner, posted, request)
        try:
            await self.channel.context.sink.accept([message])
        except Exception:
            log.exception("webchat accept failed account=%s learner=%s message=%s",
                          self.channel.account, learner, posted.message_id)
            return _error(503, "the message could not be stored; the page will try again", {"Retry-After": "1"})
        log.info("webchat message in account=%s learner=%s message=%s", self.channel.account, learner, posted.message_id)
        log.debug("webchat message text account=%s message=%s text=%r", self.channel.account, posted.message_id, posted.text)
        return JSONResponse({"accepted": True}, status_code=202)

    async def _read_body(self, request: Request) -> bytes | Response:
        try:
            body = await read_limited(request, self.max_body_bytes)
        except ClientDisconnect:
            return _error(400, "the request body was cut off")
        return _error(413, f"the request body is larger than {self.max_body_bytes} bytes") if body is None else body

    def _inbound(self, learner: str, posted: PostedMessage, request: Request) -> InboundMessage:
        return InboundMessage(
            # The page picks message ids, so they are unique only within its session: scoped here,
            # a second session reusing an id is a new message, not a duplicate of the first's.
            event_id=EventId(f"{learner}.{posted.message_id}"),
            address=Address(
                channel=ChannelName(self.channel.name),
                account=AccountId(self.channel.account),
                conversation=Conversation(chat=ChatId(learner), kind=ConversationKind.DIRECT),
            ),
            sender=Sender(user=UserId(learner), display_name=LEARNER_NAME, locale=self._locale(learner, request)),
            elements=(Text(text=posted.text),),
            addressed=True,
            received_at=datetime.now(UTC),
            source=self.channel.learners.source(request.client.host if request.client else None),
        )

    def _locale(self, learner: str, request: Request) -> str:
        """The language this request's browser prefers, kept for the session; else the one it kept."""
        said = preferred_language(request.headers.get("accept-language"))
        if said:
            self.channel.locales[learner] = said
            return said
        return self.channel.locales.get(learner) or ""

    async def events(self, request: Request) -> Response:
        session = _session_of(request)
        if session is None:
            return _no_session()
        learner = self.channel.learners.learner(session)
        feeds = self.channel.feeds
        after = feeds.resume_point(request.headers.get("last-event-id") or request.query_params.get("last_event_id"))
        try:
            feed = feeds.feed(learner)
        except FeedsFull:
            log.warning("webchat stream refused account=%s reason=full", self.channel.account)
            return _error(503, "too many open chats; try again shortly", {"Retry-After": "30"})

        async def stream() -> AsyncIterator[bytes]:
            yield f"retry: {RECONNECT_MS}\n\n".encode()
            async for event in feed.follow(after, KEEPALIVE_S):
                yield b": keep-alive\n\n" if event is None else event.encode()

        log.debug("webchat stream opened account=%s learner=%s after=%d", self.channel.account, learner, after)
        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )


_FIELD_RULES = {"message_id": _ID_RULE}
_NOT_AN_OBJECT = "the body must be a JSON object {message_id, text}"


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
        return f"{field}: unknown field (send only message_id and text)"
    if kind == "string_pattern_mismatch" and field in _FIELD_RULES:
        return f"{field}: {_FIELD_RULES[field]}"
    return f"{field}: {first['msg']}"


def _cookie_path(request: Request) -> str:
    """The account's own prefix (``/channels/webchat/<account>/``), so two accounts keep two sessions."""
    path = request.url.path
    return path[: path.rindex("/api/") + 1]
