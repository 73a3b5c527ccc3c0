"""The wire to QQ's OpenAPI: the access token, the four reply paths, errors translated once.

**The token.**  ``POST token_url {appId, clientSecret}`` hands out an
``access_token`` good for ``expires_in`` seconds (7,200; QQ writes the number
as a string).  It is kept until a minute before it ends, fetched under a lock
so calls that start together fetch one, and fetched again once when QQ
refuses it (401, 11244: another process may have fetched a newer one, which
ends ours); a second refusal in a row is the account's problem, never a loop.
Every call carries ``Authorization: QQBot <token>`` and ``X-Union-Appid``.

**Replies.**  A message to a learner names the ``msg_id`` it answers (QQ
refuses an unasked one: active push ended 2025-04-21, Q1) and a ``msg_seq``,
QQ's dedup: a second post of one ``msg_id`` + ``msg_seq`` is refused as a
duplicate (40054005), which here means "already shown" -- so a send retried
after a lost answer is shown once.  ``msg_seq`` is derived from the reply
part's idempotency key (:func:`msg_seq`), the same on every retry.

**Errors** are ``{"code": N, "message": ...}`` with a 4xx/5xx (Q1)::

    22009 msg limit exceed (the five replies, or the window)  -> ReplyWindowClosed
    40054005 duplicate msg_seq                                -> already sent (not an error)
    401 after the one refresh, 11241-11244 token/app problems -> AuthFailed
    429, 20028 too often                                      -> RateLimited
    5xx                                                       -> PeerUnavailable

No header, token or secret is ever logged; errors name the API path only.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx

from channels._kit.http_errors import BodyCodes, ErrorKind, json_body, translate
from channels._kit.media import download
from channels._kit.tokens import AccessToken, Grant, lifetime
from channels.qq.config import QQConfig
from gateway.core.channel import MediaStream
from gateway.core.errors import AuthFailed, BadRequest, PeerUnavailable, PeerUnreachable, PlatformError
from gateway.endpoints import origin, why_unreachable

log = logging.getLogger(__name__)
PLATFORM = "qq"
TIMEOUT = httpx.Timeout(10.0, connect=5.0)
TOKEN_MARGIN_S = 60.0
TOKEN_LIFE_S = 7200.0
DUPLICATE = "40054005"
"""QQ's word for "this msg_id + msg_seq was sent already"."""
SEQ_SPAN = 2**31 - 1
CODES = BodyCodes(code_field="code", kinds={
    "22009": ErrorKind.REPLY_WINDOW_CLOSED, "20028": ErrorKind.RATE_LIMITED,
    "11241": ErrorKind.AUTH_FAILED, "11242": ErrorKind.AUTH_FAILED, "11243": ErrorKind.AUTH_FAILED,
    "11244": ErrorKind.AUTH_FAILED, "100016": ErrorKind.AUTH_FAILED,
}, explained={"22009": "QQ takes no more replies to this message (five per message, within its window)"})
PATHS: dict[str, str] = {"": "v2/users/{}/messages", "group": "v2/groups/{}/messages",
                         "channel": "channels/{}/messages", "dms": "dms/{}/messages"}
"""A chat id's prefix (decode.py; none for a direct chat) -> where its replies are posted."""


def msg_seq(idempotency_key: str) -> int:
    """A reply part's ``msg_seq``: from its key, so a retry of it is the same number and QQ drops the copy."""
    return int.from_bytes(hashlib.sha256(idempotency_key.encode()).digest()[:8], "big") % SEQ_SPAN + 1


def reply_path(chat: str) -> str:
    prefix, _, place = chat.rpartition(":")
    if prefix not in PATHS or not place:
        raise BadRequest(PLATFORM, f"{chat[:40]!r} is not a QQ chat")
    return PATHS[prefix].format(place)


class QQApi:
    """One bot's calls, on an ``httpx.AsyncClient`` it is handed (or makes, and then closes)."""

    def __init__(self, config: QQConfig, client: httpx.AsyncClient | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config, self._clock = config, clock
        self._client = client or httpx.AsyncClient(timeout=TIMEOUT, trust_env=False)
        self._owned = client is None
        self.tokens = AccessToken(self._grant, margin_s=TOKEN_MARGIN_S, clock=clock)

    async def _post(self, url: str, action: str, body: dict, headers: dict[str, str]) -> dict:
        try:
            response = await self._client.post(url, json=body, headers=headers)
        except httpx.HTTPError as error:
            why = why_unreachable(error)
            if why is not None:
                raise PeerUnreachable(PLATFORM, origin(url), why, check="the network, api_base or token_url",
                                      action=action) from None
            raise PeerUnavailable(PLATFORM, f"{action}: {type(error).__name__}") from None
        parsed = json_body(response.content)
        failed = translate(PLATFORM, action, response.status_code, response.headers, parsed, codes=CODES)
        if failed is not None:
            raise failed
        return parsed if isinstance(parsed, dict) else {}

    @property
    def fetched(self) -> int:
        return self.tokens.fetched

    async def token(self, *, stale: str | None = None) -> str:
        """A good access token; ``stale`` is one QQ just refused, replaced unless another call did."""
        return await self.tokens.get(stale=stale)

    async def _grant(self) -> Grant:
        said = await self._post(self.config.token_url, "getAppAccessToken",
                                {"appId": self.config.app_id,
                                 "clientSecret": self.config.app_secret.get_secret_value()}, {})
        token = said.get("access_token")
        if not isinstance(token, str) or not token:
            raise AuthFailed(PLATFORM, "getAppAccessToken: no access_token (check app_id and app_secret)")
        lasts = lifetime(said.get("expires_in"), TOKEN_LIFE_S)
        log.info("qq access token fetched app_id=%s lasts_s=%s", self.config.app_id, lasts)
        return Grant(token, lasts)

    async def call(self, path: str, body: dict) -> dict:
        """POST ``body`` to OpenAPI ``path`` with the token, fetching a new one once if QQ refuses it."""
        token = await self.token()
        try:
            return await self._post(self.config.api_base + path, path.split("/")[0], body, self._auth(token))
        except AuthFailed:
            log.info("qq access token refused, fetching a new one app_id=%s", self.config.app_id)
        fresh = await self.token(stale=token)
        return await self._post(self.config.api_base + path, path.split("/")[0], body, self._auth(fresh))

    def _auth(self, token: str) -> dict[str, str]:
        return {"Authorization": f"QQBot {token}", "X-Union-Appid": self.config.app_id}

    async def reply(self, chat: str, text: str, *, msg_id: str, key: str) -> str:
        """Post ``text`` answering ``msg_id`` into ``chat``; QQ's id for it, or ``key`` when QQ says it was sent."""
        path = reply_path(chat)
        body: dict = {"content": text, "msg_id": msg_id, "msg_seq": msg_seq(key)}
        if not chat.startswith(("channel:", "dms:")):
            body["msg_type"] = 0  # text; the v2 paths need it
        try:
            said = await self.call(path, body)
        except PlatformError as error:
            if str(error.code) != DUPLICATE:
                raise
            log.info("qq reply was already shown app_id=%s chat=%s", self.config.app_id, chat)
            return key
        return str(said.get("id") or key)

    async def get(self, path: str, token: str | None = None) -> dict:
        """``GET`` OpenAPI ``path`` with ``token`` (or the current one)."""
        token = token or await self.token()
        try:
            response = await self._client.get(self.config.api_base + path, headers=self._auth(token))
        except httpx.HTTPError as error:
            raise PeerUnavailable(PLATFORM, f"{path}: {type(error).__name__}") from None
        parsed = json_body(response.content)
        failed = translate(PLATFORM, path, response.status_code, response.headers, parsed, codes=CODES)
        if failed is not None:
            raise failed
        return parsed if isinstance(parsed, dict) else {}

    async def me(self) -> dict:
        """``GET /users/@me``: who the credentials are (the probe)."""
        return await self.get("users/@me")

    async def gateway(self) -> tuple[str, str]:
        """``GET /gateway/bot``: the websocket gateway's URL, and the token it was asked with (identify names it)."""
        token = await self.token()
        try:
            said = await self.get("gateway/bot", token)
        except AuthFailed:  # another process may have fetched a newer token, which ends ours: once
            token = await self.token(stale=token)
            said = await self.get("gateway/bot", token)
        url = said.get("url")
        if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
            raise PeerUnavailable(PLATFORM, "gateway/bot: the answer named no ws(s):// url")
        return url, token

    @asynccontextmanager
    async def open_file(self, url: str, *, limit: int, name: str = "", declared_type: str = "") -> AsyncIterator[MediaStream]:
        """A learner's attachment from QQ's media host: its URL is signed by QQ and wants no token."""
        if not url.startswith(("https://", "http://")):
            raise BadRequest(PLATFORM, "an attachment URL that is not http(s)")
        async with download(self._client, url, limit=limit, platform=PLATFORM, name=name,
                            declared_type=declared_type) as stream:
            yield stream

    async def close(self) -> None:
        if self._owned:
            await self._client.aclose()
