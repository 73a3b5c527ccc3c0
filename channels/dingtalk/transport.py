"""The wires to DingTalk: the stream ticket through dingtalk-stream, the open API on httpx.

**The ticket.**  Stream mode starts with ``POST /v1.0/gateway/connections/open``
(client id, secret, the topics subscribed), answered with a websocket
``endpoint`` and a one-time ``ticket``.  dingtalk-stream's
``DingTalkStreamClient.open_connection`` makes that call; it is a synchronous
``requests`` call, so it runs in a worker thread (``asyncio.to_thread``) and the
event loop never waits on it.  The SDK reads its endpoint from the environment
once, at import; :func:`open_ticket` sets the SDK's attributes from the
account's ``api_base`` before each call, so a configured endpoint works without
environment tricks.  The SDK's ``start()`` loop is not used (ADR 0043): the
kit's websocket session owns the socket.

**The open API.**  ``/v1.0/oauth2/accessToken`` gives a token good for
``expireIn`` seconds, kept until a minute before its end and sent as
``x-acs-dingtalk-access-token``.  Failures come as a non-2xx status with
``{"code": "...", "message": "..."}``, translated once by the kit's
http_errors: a throttled app or API (``Forbidden.AccessDenied.QpsLimit*``) is
``RateLimited``, a bad token ``AuthFailed`` (fetched again once).  The session
webhook answers ``{"errcode": 0}``; any refusal of it means the window closed.

**Files.**  A learner's file is fetched in two steps, after the ack:
``messageFiles/download`` exchanges its ``downloadCode`` for a short-lived URL,
which is its own credential (never logged) and is fetched without the token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote_plus

import httpx

from channels._kit.http_errors import BodyCodes, ErrorKind, raise_for
from channels._kit.media import download
from channels._kit.tokens import AccessToken, Grant, lifetime
from channels.dingtalk.config import DingtalkConfig
from channels.dingtalk.decode import BOT_TOPIC
from gateway.core.channel import MediaStream
from gateway.core.errors import AuthFailed, InvalidEvent, PeerUnavailable, PeerUnreachable
from gateway.endpoints import origin, why_unreachable

PLATFORM = "dingtalk"
TOKEN_MARGIN_S = 60.0
CODES = BodyCodes(code_field="code", success=frozenset({"0", "OK"}), kinds={
    "Forbidden.AccessDenied.QpsLimitForApi": ErrorKind.RATE_LIMITED,
    "Forbidden.AccessDenied.QpsLimitForAppkeyAndApi": ErrorKind.RATE_LIMITED,
    "Forbidden.AccessDenied.IpNotInWhiteList": ErrorKind.AUTH_FAILED,
    "InvalidAuthentication": ErrorKind.AUTH_FAILED,
    "invalidClientIdOrSecret": ErrorKind.AUTH_FAILED,
})
WEBHOOK_CODES = BodyCodes(code_field="errcode", default=ErrorKind.REPLY_WINDOW_CLOSED, kinds={
    "130101": ErrorKind.RATE_LIMITED,  # sent too fast
    "410100": ErrorKind.RATE_LIMITED,  # over the per-minute budget
})
log = logging.getLogger(__name__)
sdk_log = logging.getLogger("channels.dingtalk.sdk")


def _apply_endpoint(api_base: str) -> Any:
    """The SDK's client class, pointed at ``api_base`` (it read the environment once, at import)."""
    import dingtalk_stream
    from dingtalk_stream import stream, utils

    client_class = dingtalk_stream.DingTalkStreamClient
    client_class.OPEN_CONNECTION_API = api_base + "/v1.0/gateway/connections/open"
    stream.DINGTALK_OPENAPI_ENDPOINT = utils.DINGTALK_OPENAPI_ENDPOINT = api_base
    return client_class


async def open_ticket(settings: DingtalkConfig) -> str:
    """The websocket URL of a new stream connection (its ticket in the query), subscribed to robot messages."""
    import dingtalk_stream

    client_class = _apply_endpoint(settings.api_base)
    credential = dingtalk_stream.Credential(settings.client_id, settings.client_secret.get_secret_value())
    client = client_class(credential, logger=sdk_log)
    client.register_callback_handler(BOT_TOPIC, dingtalk_stream.CallbackHandler())
    opened = await asyncio.to_thread(client.open_connection)
    if not isinstance(opened, dict) or not opened.get("endpoint") or not opened.get("ticket"):
        raise PeerUnavailable(PLATFORM, "the stream connection was not opened (check client_id and client_secret, "
                                        "and that the app is published with Stream mode)")
    return f"{opened['endpoint']}?ticket={quote_plus(str(opened['ticket']))}"


class Api:
    """The open API with one account's token; handed its httpx client."""

    def __init__(self, settings: DingtalkConfig, client: httpx.AsyncClient) -> None:
        self.settings, self.client = settings, client
        self.tokens = AccessToken(self._grant, margin_s=TOKEN_MARGIN_S)

    async def _post(self, url: str, action: str, body: Any, *, method: str = "POST", headers: dict[str, str] | None = None,
                    codes: BodyCodes = CODES) -> Any:
        try:
            response = await self.client.request(method, url, json=body, headers=headers,
                                                  timeout=self.settings.request_timeout_s)
        except httpx.HTTPError as error:  # never the URL: a session webhook's query is its credential
            why = why_unreachable(error)
            if why is not None:
                raise PeerUnreachable(PLATFORM, origin(url), why, check="the network or api_base", action=action) from None
            raise PeerUnavailable(PLATFORM, f"{action}: {type(error).__name__}") from None
        return raise_for(PLATFORM, action, response, codes=codes)

    async def token(self, *, stale: str | None = None) -> str:
        return await self.tokens.get(stale=stale)

    async def _grant(self) -> Grant:
        got = await self._post(self.settings.api_base + "/v1.0/oauth2/accessToken", "accessToken", {
            "appKey": self.settings.client_id, "appSecret": self.settings.client_secret.get_secret_value()})
        if not isinstance(got, dict) or not got.get("accessToken"):
            raise AuthFailed(PLATFORM, "accessToken: no token in the answer")
        return Grant(str(got["accessToken"]), lifetime(got.get("expireIn"), 7200.0))

    async def call(self, path: str, body: Any, *, method: str = "POST") -> Any:
        """One open API call with the token; a refused token is fetched again once."""
        for attempt in (1, 2):
            token = await self.token()
            try:
                return await self._post(self.settings.api_base + path, path.rsplit("/", 1)[-1], body,
                                        method=method, headers={"x-acs-dingtalk-access-token": token})
            except AuthFailed:
                if attempt == 2:
                    raise
                await self.token(stale=token)
        raise AssertionError("unreachable")  # pragma: no cover

    async def webhook(self, url: str, body: Any) -> Any:
        """A reply through the learner's session webhook (no token: the URL is the credential)."""
        return await self._post(url, "sessionWebhook", body, codes=WEBHOOK_CODES)

    @asynccontextmanager
    async def open_file(self, download_code: str, *, limit: int, name: str = "") -> AsyncIterator[MediaStream]:
        """A learner's file by its ``downloadCode``, streamed within ``limit`` bytes."""
        got = await self.call("/v1.0/robot/messageFiles/download",
                              {"downloadCode": download_code, "robotCode": self.settings.robot_code})
        url = got.get("downloadUrl") if isinstance(got, dict) else None
        if not isinstance(url, str) or not url.startswith(("https://", "http://")):
            raise InvalidEvent("dingtalk messageFiles/download gave no download URL")
        async with download(self.client, url, limit=limit, platform=PLATFORM, name=name) as stream:
            yield stream
