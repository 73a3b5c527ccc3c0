"""The built-in web chat: a learner chat page served by the gateway itself.

There is no platform here: the transport is the gateway's own HTTP app.  The
page POSTs what the learner writes (``api.py`` turns it into an inbound
message and answers only once the sink made it durable) and follows an SSE
stream of what the gateway sends to its session (``feed.py``).

A session is one browser: a secret the gateway gives it in an HttpOnly cookie
(``identity.py``).  The learner id derived from it is both the chat and the
sender, and the key of the session's feed; the secret itself stays at the HTTP
edge.  The learner's language is the browser's: the ``Accept-Language`` it sends with the
session call and with every message (``api.py``) becomes ``Sender.locale``, which picks the
language of the gateway's own notices.  Sent message ids are the idempotency keys the
outbound path hands us, so a retried send replaces its own bubble on the page
instead of adding a second one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cachetools import TTLCache
from pydantic import Field

from channels.base import Channel, ChannelContext
from channels.webchat.feed import FeedsFull, SessionFeeds
from channels.webchat.identity import LearnerIds
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.config import AccountConfig
from gateway.core.errors import PeerUnavailable
from gateway.core.messages import Address, MessageId, Referrer, RenderedPart, SentMessage

if TYPE_CHECKING:  # pragma: no cover - typing only; starlette loads with the routes
    from starlette.routing import BaseRoute

log = logging.getLogger(__name__)

HEARTBEAT_S = 5.0
DEFAULT_TITLE = "Study partner"
"""Only for an account no partner is bound to as a whole (bindings per chat, or none yet)."""


class WebchatConfig(AccountConfig):
    title: str | None = Field(default=None, min_length=1, max_length=120)
    """Shown as the page's title and heading; unset, the name of the partner bound to the account."""
    max_text_chars: int = Field(default=8000, ge=1, le=100_000)
    """Longest message a learner may send, in characters (code points)."""
    backlog_events: int = Field(default=200, ge=10, le=10_000)
    """Events kept per session for a page that reconnects."""
    backlog_bytes: int = Field(default=256 * 1024, ge=4096, le=64 * 1024 * 1024)
    """Bytes of events kept per session (the newest event always stays, whatever its size)."""
    max_sessions: int = Field(default=1000, ge=1, le=1_000_000)
    """Sessions held in memory; a new one evicts the longest-unfollowed, and with all followed it is refused."""
    idle_session_s: float = Field(default=1800.0, gt=0)
    """A session nobody follows is forgotten after this long."""


class WebchatChannel(Channel[WebchatConfig]):
    name = "webchat"
    config_model = WebchatConfig

    def __init__(self, context: ChannelContext[AccountConfig]) -> None:
        config = context.config
        super().__init__(context.with_config(
            config if isinstance(config, WebchatConfig) else WebchatConfig.model_validate(config.model_dump())))
        self.title = self.settings.title or context.partner_name or DEFAULT_TITLE
        """What the page calls the partner (escaped when the page is rendered)."""
        self.feeds = SessionFeeds(
            backlog=self.settings.backlog_events, backlog_bytes=self.settings.backlog_bytes,
            idle_ttl_s=self.settings.idle_session_s, max_sessions=self.settings.max_sessions,
        )
        """Keyed by learner id."""
        self.learners = LearnerIds(context.data_dir)
        self.locales: TTLCache[str, str] = TTLCache(maxsize=self.settings.max_sessions, ttl=self.settings.idle_session_s)
        """learner id -> the language the browser asked for (``Accept-Language``) when it last said one."""

    async def run(self, heartbeat: Heartbeat) -> None:
        heartbeat.set_state(ChannelState.RUNNING)
        while True:
            heartbeat.beat()
            self.feeds.sweep()
            await asyncio.sleep(HEARTBEAT_S)

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        message = MessageId(idempotency_key)
        self._publish_message(target, message, part, final=part.final)
        log.info("webchat message out account=%s learner=%s message=%s", self.account, target.conversation.chat, message)
        return SentMessage(message=message)

    async def edit(self, target: Address, handle: str, part: RenderedPart, *, referrer: Referrer) -> None:
        message = MessageId(handle)  # the message id is the handle: the page replaces the copy with that id
        self._publish_message(target, message, part, final=part.final)
        log.debug("webchat message edited account=%s learner=%s message=%s final=%s",
                  self.account, target.conversation.chat, message, part.final)

    async def typing(self, target: Address) -> None:
        self._publish(target, "typing", {})

    def http_routes(self) -> list[BaseRoute]:
        from channels.webchat.api import webchat_routes  # starlette loads only when the page is served

        return webchat_routes(self)

    async def close(self) -> None:
        self.feeds.close()

    def _publish_message(self, target: Address, message: MessageId, part: RenderedPart, *, final: bool) -> None:
        # part.text is HTML made by the gateway's renderer, which escapes everything the model wrote.
        data: dict[str, Any] = {"id": message, "html": part.text, "final": final}
        links = [_attachment(a.kind, a.url, a.name) for a in part.attachments if _is_web_url(a.url)]
        if links:
            data["attachments"] = links
        if len(links) < len(part.attachments):
            log.info("webchat attachment dropped account=%s message=%s reason=no http url", self.account, message)
        self._publish(target, "message", data, replaces=message)  # an edit carries the whole text: the old copy goes

    def _publish(self, target: Address, name: str, data: dict[str, Any], *, replaces: str | None = None) -> None:
        try:
            self.feeds.publish(target.conversation.chat, name, data, replaces=replaces)
        except FeedsFull as error:
            raise PeerUnavailable(self.name, str(error)) from error


def _attachment(kind: str, url: str | None, name: str) -> dict[str, str]:
    return {"kind": kind, "url": url or "", "name": name}


def _is_web_url(url: str | None) -> bool:
    return url is not None and urlsplit(url).scheme in ("http", "https")
