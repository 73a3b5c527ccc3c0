"""The wire to WeCom's API for a self-built app: ``access_token``, ``message/send``, errors translated once.

``cgi-bin/gettoken?corpid=&corpsecret=`` hands out an ``access_token`` good for
``expires_in`` seconds (7,200).  It is fetched once, kept until a minute before
it ends, and fetched again once, at most, when WeCom says it is no longer good
(40014 not a token, 42001 expired, 40001 bad credential) -- another process
using the same app may have fetched a new one.  A second refusal in a row is
the account's problem, not the token's.

WeCom answers 200 with ``{"errcode": N, "errmsg": ...}`` on failure; the kit's
:class:`~channels._kit.http_errors.BodyCodes` translates the codes::

    45009 API quota reached, 45033 too many at once                    -> RateLimited
    40001, 42001, 40014 (after the one refresh), 40013 bad corpid,
    40056 bad agentid, 60020 caller's IP not trusted                   -> AuthFailed
    81013 the member is not in the app's visible range                 -> NotFound
    -1 system busy, HTTP 5xx                                           -> PeerUnavailable
    45002 content too long, 44004 empty, any other code                -> BadRequest

``enable_duplicate_check`` stays 0: WeCom's check drops a message whose
*content* repeats within the interval, with no key of the sender's, so it
cannot carry the reply's idempotency key and would drop a tutor's honest second
"Yes, exactly." to the same learner (ADR 0034).

Files go both ways by ``media_id`` (valid three days): ``cgi-bin/media/upload?type=image|file``
takes one multipart field ``media`` and answers the id ``message/send`` then names; ``cgi-bin/media/get``
hands a learner's file back as bytes, or a 200 with an errcode (40007: no such or expired id), which
the kit's download reads as that error.

The secret and the token are in query strings, so no URL is ever logged or put
in an error message: errors name the API path only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from urllib.parse import urlencode

import httpx

from channels._kit.http_errors import BodyCodes, ErrorKind, json_body, translate
from channels._kit.media import download
from channels.wecom.config import AppMode
from gateway.core.channel import MediaStream
from gateway.core.errors import NotFound, PeerUnavailable, PeerUnreachable, PlatformError
from gateway.endpoints import origin, why_unreachable

PLATFORM = "wecom"
log = logging.getLogger(__name__)
TOKEN_STALE = frozenset({"40001", "42001", "40014"})
CODES = BodyCodes(code_field="errcode", kinds={
    "45009": ErrorKind.RATE_LIMITED, "45033": ErrorKind.RATE_LIMITED,
    "40001": ErrorKind.AUTH_FAILED, "42001": ErrorKind.AUTH_FAILED, "40014": ErrorKind.AUTH_FAILED,
    "40013": ErrorKind.AUTH_FAILED, "40056": ErrorKind.AUTH_FAILED, "60020": ErrorKind.AUTH_FAILED,
    "81013": ErrorKind.NOT_FOUND, "-1": ErrorKind.UNAVAILABLE,
})
TOKEN_MARGIN_S = 60.0
"""A token is fetched again this long before WeCom says it ends, so no call carries one at its last second."""
TIMEOUT = httpx.Timeout(10.0, connect=5.0)


class AppApi:
    """One app's calls to WeCom, on an ``httpx.AsyncClient`` it is handed (or makes, and then closes)."""

    def __init__(self, mode: AppMode, client: httpx.AsyncClient | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.mode, self._clock = mode, clock
        self._client = client or httpx.AsyncClient(timeout=TIMEOUT, trust_env=False)
        self._owned = client is None
        self._token: str | None = None
        self._expires = 0.0
        self._lock = asyncio.Lock()
        self.fetched = 0
        """Tokens fetched since start (the tests read it)."""

    async def _call(self, path: str, *, params: dict[str, str], body: dict | None = None) -> dict:
        url = self.mode.api_base + path
        try:
            if body is None:
                response = await self._client.get(url, params=params)
            else:
                content = json.dumps(body, ensure_ascii=False).encode()
                response = await self._client.post(url, params=params, content=content,
                                                   headers={"Content-Type": "application/json; charset=utf-8"})
        except httpx.HTTPError as error:
            why = why_unreachable(error)
            if why is not None:
                raise PeerUnreachable(PLATFORM, origin(self.mode.api_base), why, check="the network or api_base",
                                      action=path) from None
            raise PeerUnavailable(PLATFORM, f"{path}: {type(error).__name__}") from None
        parsed = json_body(response.content)
        failed = translate(PLATFORM, path, response.status_code, response.headers, parsed, codes=CODES)
        if failed is not None:
            raise failed
        return parsed if isinstance(parsed, dict) else {}

    async def token(self, *, stale: str | None = None) -> str:
        """A good ``access_token``; ``stale`` is one WeCom just refused, replaced unless another call did."""
        async with self._lock:
            if self._token is not None and self._token != stale and self._clock() < self._expires:
                return self._token
            said = await self._call("cgi-bin/gettoken", params={
                "corpid": self.mode.corpid, "corpsecret": self.mode.corpsecret.get_secret_value()})
            token, lasts = said.get("access_token"), said.get("expires_in", 7200)
            if not isinstance(token, str) or not token:
                raise PeerUnavailable(PLATFORM, "cgi-bin/gettoken: the answer has no access_token")
            self._token, self._expires = token, self._clock() + max(0.0, float(lasts) - TOKEN_MARGIN_S)
            self.fetched += 1
            log.info("wecom access token fetched corpid=%s lasts_s=%s", self.mode.corpid, lasts)
            return token

    async def post(self, path: str, body: dict) -> dict:
        """POST ``body`` to ``path`` with the token, fetching a new token once if WeCom says it is stale."""
        token = await self.token()
        try:
            return await self._call(path, params={"access_token": token}, body=body)
        except PlatformError as error:
            if str(error.code) not in TOKEN_STALE:
                raise
            log.info("wecom access token refused, fetching a new one corpid=%s code=%s", self.mode.corpid, error.code)
        return await self._call(path, params={"access_token": await self.token(stale=token)}, body=body)

    async def send_text(self, userid: str, content: str) -> str:
        """One text app message to the member (``cgi-bin/message/send``); WeCom's ``msgid`` for it."""
        said = await self.post("cgi-bin/message/send", {
            "touser": userid, "msgtype": "text", "agentid": self.mode.agentid, "text": {"content": content},
            "safe": 0, "enable_duplicate_check": 0})
        if said.get("invaliduser"):
            raise NotFound(PLATFORM, "cgi-bin/message/send: the member is not in the app's visible range")
        return str(said.get("msgid") or "")

    async def upload(self, kind: str, name: str, data: bytes, mime: str) -> str:
        """Upload one file as temporary material (``cgi-bin/media/upload``); the ``media_id`` WeCom gave it.

        Nothing is sent yet: a failed upload leaves no message behind, so the part is simply tried again."""
        path = "cgi-bin/media/upload"
        token = await self.token()
        for attempt in (0, 1):
            try:
                said = await self._form(path, {"access_token": token, "type": kind}, name, data, mime)
                break
            except PlatformError as error:
                if attempt or str(error.code) not in TOKEN_STALE:
                    raise
                token = await self.token(stale=token)
        media_id = said.get("media_id")
        if not isinstance(media_id, str) or not media_id:
            raise PeerUnavailable(PLATFORM, f"{path}: the answer has no media_id")
        return media_id

    async def _form(self, path: str, params: dict[str, str], name: str, data: bytes, mime: str) -> dict:
        try:
            response = await self._client.post(self.mode.api_base + path, params=params,
                                               files={"media": (name, data, mime)})
        except httpx.HTTPError as error:
            raise PeerUnavailable(PLATFORM, f"{path}: {type(error).__name__}") from None
        parsed = json_body(response.content)
        failed = translate(PLATFORM, path, response.status_code, response.headers, parsed, codes=CODES)
        if failed is not None:
            raise failed
        return parsed if isinstance(parsed, dict) else {}

    async def send_media(self, userid: str, msgtype: str, media_id: str) -> str:
        """One image or file app message naming an uploaded ``media_id``; WeCom's ``msgid`` for it."""
        said = await self.post("cgi-bin/message/send", {
            "touser": userid, "msgtype": msgtype, "agentid": self.mode.agentid, msgtype: {"media_id": media_id},
            "safe": 0, "enable_duplicate_check": 0})
        if said.get("invaliduser"):
            raise NotFound(PLATFORM, "cgi-bin/message/send: the member is not in the app's visible range")
        return str(said.get("msgid") or "")

    async def send_news(self, userid: str, title: str, url: str, picurl: str = "") -> str:
        """One news card (图文, ``msgtype: news``): a title that opens ``url``, showing ``picurl`` when
        given -- how a file known only by its URL is shown, since an upload needs the bytes."""
        article = {"title": title, "url": url, **({"picurl": picurl} if picurl else {})}
        said = await self.post("cgi-bin/message/send", {
            "touser": userid, "msgtype": "news", "agentid": self.mode.agentid, "news": {"articles": [article]},
            "safe": 0, "enable_duplicate_check": 0})
        if said.get("invaliduser"):
            raise NotFound(PLATFORM, "cgi-bin/message/send: the member is not in the app's visible range")
        return str(said.get("msgid") or "")

    @asynccontextmanager
    async def open_media(self, media_id: str, *, limit: int, declared_type: str = "",
                         name: str = "") -> AsyncIterator[MediaStream]:
        """A learner's file by its ``media_id`` (``cgi-bin/media/get``), streamed within ``limit`` bytes;
        fetched again once under a new token if WeCom says the one held is stale."""
        token = await self.token()
        async with AsyncExitStack() as stack:
            try:
                stream = await stack.enter_async_context(self._media(token, media_id, limit, declared_type, name))
            except PlatformError as error:
                if str(error.code) not in TOKEN_STALE:
                    raise
                fresh = await self.token(stale=token)
                stream = await stack.enter_async_context(self._media(fresh, media_id, limit, declared_type, name))
            yield stream

    def _media(self, token: str, media_id: str, limit: int, declared_type: str,
               name: str) -> AbstractAsyncContextManager[MediaStream]:
        url = f"{self.mode.api_base}cgi-bin/media/get?{urlencode({'access_token': token, 'media_id': media_id})}"
        return download(self._client, url, limit=limit, platform=PLATFORM, declared_type=declared_type, name=name,
                        codes=CODES)

    async def close(self) -> None:
        if self._owned:
            await self._client.aclose()
