"""The wire to WeChat's API for an Official Account: ``access_token``, customer-service messages, errors translated once.

Every call but ``cgi-bin/token`` carries an ``access_token``, got from appid and
appsecret and good for ``expires_in`` seconds (7,200).  It is fetched once,
kept until a minute before it expires, and fetched again once, at most, when
WeChat says it is no longer good (40001 invalid, 42001 expired, 40014 not a
token) -- another process that shares the appid may have fetched a new one,
which ends ours.  A second refusal in a row is the account's problem, not the
token's.

WeChat answers 200 with ``{"errcode": N, "errmsg": ...}`` on failure; the
kit's :class:`~channels._kit.http_errors.BodyCodes` translates the codes, most
specific first::

    45015 out of the 48-hour window, 45047 customer-service quota used up  -> ReplyWindowClosed
    45009 API quota reached, 45011 too often                               -> RateLimited
    40001, 42001, 40014 (after the one refresh), 40125 bad appsecret,
    40164 / 61004 caller's IP not in the allow-list                        -> AuthFailed
    43004 the learner unfollowed, 40003 not an OpenID of this account       -> NotFound
    -1 system busy, HTTP 5xx                                               -> PeerUnavailable
    45002 content too long, any other code                                 -> BadRequest

The appsecret and the token are in query strings, so no URL is ever logged or
put in an error message: errors name the API path only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable

import httpx

from channels._kit.http_errors import BodyCodes, ErrorKind, json_body, translate
from channels.weixin.config import OfficialAccountConfig
from gateway.core.errors import PeerUnavailable, PeerUnreachable, PlatformError, ReplyWindowClosed
from gateway.endpoints import origin, why_unreachable

PLATFORM = "weixin"
log = logging.getLogger(__name__)
TOKEN_STALE = frozenset({"40001", "42001", "40014"})
WINDOW_CLOSED = {"45015": "the learner's 48-hour customer-service window has closed",
                 "45047": "the customer-service messages allowed for the learner's last message are used up"}
CODES = BodyCodes(code_field="errcode", kinds={
    "45009": ErrorKind.RATE_LIMITED, "45011": ErrorKind.RATE_LIMITED,
    "40001": ErrorKind.AUTH_FAILED, "42001": ErrorKind.AUTH_FAILED, "40014": ErrorKind.AUTH_FAILED,
    "40125": ErrorKind.AUTH_FAILED, "40013": ErrorKind.AUTH_FAILED, "40164": ErrorKind.AUTH_FAILED,
    "61004": ErrorKind.AUTH_FAILED, "43004": ErrorKind.NOT_FOUND, "40003": ErrorKind.NOT_FOUND,
    "-1": ErrorKind.UNAVAILABLE,
})
TOKEN_MARGIN_S = 60.0
"""A token is fetched again this long before WeChat says it ends, so no call carries one at its last second."""
TIMEOUT = httpx.Timeout(10.0, connect=5.0)


class OfficialAccountApi:
    """One account's calls to WeChat, on an ``httpx.AsyncClient`` it is handed (or makes, and then closes)."""

    def __init__(self, config: OfficialAccountConfig, client: httpx.AsyncClient | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config, self._clock = config, clock
        self._client = client or httpx.AsyncClient(timeout=TIMEOUT, trust_env=False)
        self._owned = client is None
        self._token: str | None = None
        self._expires = 0.0
        self._lock = asyncio.Lock()
        self.fetched = 0
        """Tokens fetched since start (``/status`` and the tests read it)."""

    async def _get_json(self, path: str, *, params: dict[str, str], body: dict | None = None) -> dict:
        url = self.config.api_base + path
        try:
            if body is None:
                response = await self._client.get(url, params=params)
            else:
                content = json.dumps(body, ensure_ascii=False).encode()  # WeChat shows \\uXXXX escapes as typed
                response = await self._client.post(url, params=params, content=content,
                                                   headers={"Content-Type": "application/json; charset=utf-8"})
        except httpx.HTTPError as error:
            why = why_unreachable(error)
            if why is not None:
                raise PeerUnreachable(PLATFORM, origin(self.config.api_base), why, check="the network or api_base",
                                      action=path) from None
            raise PeerUnavailable(PLATFORM, f"{path}: {type(error).__name__}") from None
        parsed = json_body(response.content)
        found = CODES.failure(parsed)
        if found is not None and found[0] in WINDOW_CLOSED:
            raise ReplyWindowClosed(PLATFORM, f"{path}: {WINDOW_CLOSED[found[0]]}", code=found[0])
        failed = translate(PLATFORM, path, response.status_code, response.headers, parsed, codes=CODES)
        if failed is not None:
            raise failed
        return parsed if isinstance(parsed, dict) else {}

    async def token(self, *, stale: str | None = None) -> str:
        """A good ``access_token``; ``stale`` is one WeChat just refused, which is replaced unless another call did."""
        async with self._lock:
            if self._token is not None and self._token != stale and self._clock() < self._expires:
                return self._token
            said = await self._get_json("cgi-bin/token", params={
                "grant_type": "client_credential", "appid": self.config.appid,
                "secret": self.config.appsecret.get_secret_value()})
            token, lasts = said.get("access_token"), said.get("expires_in", 7200)
            if not isinstance(token, str) or not token:
                raise PeerUnavailable(PLATFORM, "cgi-bin/token: the answer has no access_token")
            self._token, self._expires = token, self._clock() + max(0.0, float(lasts) - TOKEN_MARGIN_S)
            self.fetched += 1
            log.info("weixin access token fetched appid=%s lasts_s=%s", self.config.appid, lasts)
            return token

    async def call(self, path: str, body: dict) -> dict:
        """POST ``body`` to ``path`` with the token, fetching a new token once if WeChat says it is stale."""
        token = await self.token()
        try:
            return await self._get_json(path, params={"access_token": token}, body=body)
        except PlatformError as error:
            if str(error.code) not in TOKEN_STALE:
                raise
            log.info("weixin access token refused, fetching a new one appid=%s code=%s", self.config.appid, error.code)
        return await self._get_json(path, params={"access_token": await self.token(stale=token)}, body=body)

    async def send_text(self, openid: str, content: str) -> None:
        """One customer-service text message to the learner (``cgi-bin/message/custom/send``)."""
        await self.call("cgi-bin/message/custom/send", {"touser": openid, "msgtype": "text", "text": {"content": content}})

    async def close(self) -> None:
        if self._owned:
            await self._client.aclose()
