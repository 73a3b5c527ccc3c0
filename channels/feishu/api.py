"""The wire to Feishu's REST API (``/open-apis``): the tenant access token, sends, CardKit, files.

Plain httpx on an ``httpx.AsyncClient``: lark-oapi's own ``lark.Client`` fetches its token with
blocking ``requests`` even on its async path and keeps it in a process-wide cache, so the REST half
is written here (ADR 0042); the long connection, whose protobuf framing is the SDK's, stays the SDK's.

**The token.** ``auth/v3/tenant_access_token/internal`` with the App ID and Secret hands out a
``tenant_access_token`` good for ``expire`` seconds (2 h).  It is kept until five minutes before it
ends, fetched by one caller at a time, and fetched once more when Feishu says it is no longer good
(99991663, 99991668, 99991677); a second refusal is ``AuthFailed``, never a loop.

**Errors.** Feishu answers ``{"code": N, "msg": ...}``, on a 200 or a 4xx; translated once::

    99991400 app over its rate, 230020 chat over its rate, HTTP 429  -> RateLimited
    10003/10014 bad App ID or Secret, 99991672 a scope is missing      -> AuthFailed
    230002 bot not in the chat, 230013 user outside the app's range   -> Forbidden (that chat only)
    230011 the message answered was withdrawn                          -> ReplyWindowClosed
    HTTP 5xx, unreachable                                              -> PeerUnavailable
    any other code                                                      -> BadRequest

**Idempotency.** Sends and CardKit updates carry ``uuid``: Feishu drops a second request with the same
uuid within an hour, so the outbound path's retry of a lost answer shows one message.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

from channels._kit.http_errors import BodyCodes, ErrorKind, raise_for
from channels._kit.media import download
from channels._kit.tokens import AccessToken, Grant, lifetime
from channels.feishu.config import FeishuConfig
from gateway.core.channel import MediaStream
from gateway.core.errors import AuthFailed, InvalidEvent, PeerUnavailable

PLATFORM = "feishu"
STALE_TOKEN = frozenset({"99991663", "99991668", "99991677", "99991661"})
CODES = BodyCodes(code_field="code", kinds={
    "99991400": ErrorKind.RATE_LIMITED, "230020": ErrorKind.RATE_LIMITED,
    "10003": ErrorKind.AUTH_FAILED, "10014": ErrorKind.AUTH_FAILED, "99991672": ErrorKind.AUTH_FAILED,
    **{code: ErrorKind.AUTH_FAILED for code in STALE_TOKEN},
    "230002": ErrorKind.FORBIDDEN, "230013": ErrorKind.FORBIDDEN,
    "230011": ErrorKind.REPLY_WINDOW_CLOSED,
}, explained={"99991672": "the app lacks a permission: add the scope in the developer console and publish a version"})
TOKEN_MARGIN_S = 300.0


class FeishuApi:
    """One app's calls, on an ``httpx.AsyncClient`` it is handed (or makes, and then closes)."""

    def __init__(self, settings: FeishuConfig, client: httpx.AsyncClient | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings, self.base = settings, settings.api_base + "/open-apis/"
        self._own = client is None
        self.client = client or httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0))
        self.tokens = AccessToken(self._grant, margin_s=TOKEN_MARGIN_S, clock=clock)

    async def _request(self, method: str, path: str, action: str, **kwargs: Any) -> Any:
        try:
            response = await self.client.request(method, self.base + path, **kwargs)
        except httpx.HTTPError as error:
            raise PeerUnavailable(PLATFORM, f"{action}: {self.settings.api_base} unreachable ({type(error).__name__})") from None
        return raise_for(PLATFORM, action, response, codes=CODES) or {}

    @property
    def fetched(self) -> int:
        return self.tokens.fetched

    async def token(self, *, stale: str | None = None) -> str:
        """The tenant access token, fetched when there is none, it is near its end, or ``stale`` was refused."""
        return await self.tokens.get(stale=stale)

    async def _grant(self) -> Grant:
        said = await self._request("POST", "auth/v3/tenant_access_token/internal", "tenant_access_token", json={
            "app_id": self.settings.app_id, "app_secret": self.settings.app_secret.get_secret_value()})
        token = said.get("tenant_access_token")
        if not isinstance(token, str) or not token:
            raise AuthFailed(PLATFORM, "tenant_access_token: the answer has no token")
        return Grant(token, lifetime(said.get("expire"), 0.0))

    async def call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """One call with the token; ``data`` of the answer.  A token Feishu calls stale is fetched again once."""
        action = path.split("?", 1)[0]
        token = await self.token()
        for attempt in (1, 2):
            try:
                said = await self._request(method, path, action, headers={"Authorization": f"Bearer {token}"}, **kwargs)
                data = said.get("data") if isinstance(said, dict) else None
                return data if isinstance(data, dict) else {}
            except AuthFailed as refused:
                if attempt == 2 or str(refused.code) not in STALE_TOKEN:
                    raise
                token = await self.token(stale=token)
        raise AssertionError("unreachable")  # pragma: no cover

    async def bot_open_id(self) -> str:
        """The app's own open_id (``bot/v3/info``): mentions of it address the bot."""
        token = await self.token()
        said = await self._request("GET", "bot/v3/info", "bot/v3/info", headers={"Authorization": f"Bearer {token}"})
        bot = said.get("bot") if isinstance(said, dict) else None
        return str(bot.get("open_id") or "") if isinstance(bot, dict) else ""

    async def send(self, chat: str, msg_type: str, content: dict[str, Any], *, uuid: str,
                   reply_to: str | None = None, in_thread: bool = False) -> str:
        """One message to ``chat``, or a reply to ``reply_to`` (in its thread when ``in_thread``); its id."""
        body = {"msg_type": msg_type, "content": json.dumps(content, ensure_ascii=False), "uuid": uuid}
        if reply_to:
            data = await self.call("POST", f"im/v1/messages/{reply_to}/reply", json={**body, "reply_in_thread": in_thread})
        else:
            data = await self.call("POST", "im/v1/messages?receive_id_type=chat_id", json={**body, "receive_id": chat})
        return str(data.get("message_id") or "")

    async def create_card(self, card: dict[str, Any]) -> str:
        """A CardKit card entity (``cardkit/v1/cards``); its ``card_id``, which a message then shows."""
        data = await self.call("POST", "cardkit/v1/cards", json={"type": "card_json", "data": json.dumps(card, ensure_ascii=False)})
        card_id = data.get("card_id")
        if not isinstance(card_id, str) or not card_id:
            raise PeerUnavailable(PLATFORM, "cardkit/v1/cards: the answer has no card_id")
        return card_id

    async def card_text(self, card_id: str, element: str, text: str, *, sequence: int, uuid: str) -> None:
        """The whole text of a streaming element: Feishu types out what is new."""
        await self.call("PUT", f"cardkit/v1/cards/{card_id}/elements/{element}/content",
                        json={"content": text, "sequence": sequence, "uuid": uuid})

    async def card_settings(self, card_id: str, config: dict[str, Any], *, sequence: int, uuid: str) -> None:
        await self.call("PATCH", f"cardkit/v1/cards/{card_id}/settings",
                        json={"settings": json.dumps({"config": config}), "sequence": sequence, "uuid": uuid})

    async def upload(self, kind: str, name: str, data: bytes, mime: str) -> str:
        """An image (``im/v1/images``) or file (``im/v1/files``) uploaded; the key a message then names."""
        if kind == "image":
            said = await self.call("POST", "im/v1/images", data={"image_type": "message"}, files={"image": (name, data, mime)})
            key = said.get("image_key")
        else:
            said = await self.call("POST", "im/v1/files", data={"file_type": "stream", "file_name": name},
                                   files={"file": (name, data, mime)})
            key = said.get("file_key")
        if not isinstance(key, str) or not key:
            raise PeerUnavailable(PLATFORM, f"upload of a {kind}: the answer has no key")
        return key

    @asynccontextmanager
    async def open_resource(self, locator: str, *, limit: int, name: str = "") -> AsyncIterator[MediaStream]:
        """A learner's file (``im/v1/messages/{id}/resources/{key}?type=``), streamed within ``limit``."""
        message_id, kind, key = (locator.split("/", 2) + ["", ""])[:3]
        if not (message_id and kind in ("image", "file") and key):
            raise InvalidEvent("feishu file locator is not one this channel made")
        url = f"{self.base}im/v1/messages/{message_id}/resources/{key}?type={kind}"
        headers = {"Authorization": f"Bearer {await self.token()}"}
        async with download(self.client, url, limit=limit, platform=PLATFORM, headers=headers, name=name, codes=CODES) as stream:
            yield stream

    async def close(self) -> None:
        if self._own:
            await self.client.aclose()
