"""Tencent's ``cgi-bin`` JSON API, as WeChat Official Accounts and WeCom self-built apps both speak it.

Both platforms work the same way, and this module is that way written once:

- **An access token.**  Every call but the token fetch carries
  ``?access_token=``, got from the account's id and secret and good for
  ``expires_in`` seconds (7,200).  It is fetched once, kept until
  :data:`TOKEN_MARGIN_S` before it ends (so no call carries one at its last
  second), under a lock, so calls that start together fetch one token.
- **Refreshed once.**  When a call is answered 40001 (bad credential), 42001
  (expired) or 40014 (not a token), another process sharing the account may
  have fetched a new token, which ends ours: the token is fetched again and the
  call tried once more.  A second refusal in a row is the account's problem,
  not the token's -- :class:`~gateway.core.errors.AuthFailed`, never a loop.
- **Errors inside 200s.**  Failures are ``{"errcode": N, "errmsg": ...}``,
  translated once by :func:`~channels._kit.http_errors.translate` with the
  channel's table (:func:`errcodes` adds the stale-token codes every table
  needs); a server that cannot be reached names its origin, never a URL.

- **Files by ``media_id``.**  :meth:`TencentApi.upload_file` posts one multipart
  file (``media/upload``) and :meth:`TencentApi.media` streams one back
  (``media/get``) through the kit's download, which reads a 200 whose JSON
  carries an errcode as that error; both fetch a fresh token once, like
  :meth:`TencentApi.call`.

What differs stays in the channel: the token endpoint and its query
(:class:`TokenFetch`), the errcode table (WeChat's closed 48-hour window is
one of its rows), the ``api_base``, and the calls themselves.

The secret and the token ride in query strings, so no URL is ever logged or put
in an error message: errors name the API path only.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlencode

import httpx
from pydantic import SecretStr

from channels._kit.http_errors import BodyCodes, ErrorKind, json_body, translate
from channels._kit.media import download
from channels._kit.tokens import AccessToken, Grant, lifetime
from gateway.core.channel import MediaStream
from gateway.core.errors import PeerUnavailable, PeerUnreachable, PlatformError
from gateway.endpoints import origin, why_unreachable

log = logging.getLogger(__name__)
STALE_TOKEN = frozenset({"40001", "42001", "40014"})
"""Codes that may mean only "this token is no longer good": worth one fresh token."""
TOKEN_MARGIN_S = 60.0
"""A token is fetched again this long before the platform says it ends."""
TOKEN_LIFE_S = 7200
"""What a token answer without ``expires_in`` is taken to last (both platforms' documented life)."""
TIMEOUT = httpx.Timeout(10.0, connect=5.0)


def errcodes(kinds: Mapping[str, ErrorKind], *, explained: Mapping[str, str] | None = None) -> BodyCodes:
    """A channel's ``errcode`` table, with the stale-token codes as ``AuthFailed`` (what a second refusal is)."""
    return BodyCodes(code_field="errcode", kinds={**dict.fromkeys(STALE_TOKEN, ErrorKind.AUTH_FAILED), **kinds},
                     explained=explained or {})


@dataclass(frozen=True)
class TokenFetch:
    """Where a platform hands out its ``access_token``, and the query that asks for it.

    ``params`` are the query's plain parts, in order; the secret is added last as ``secret_param`` and
    stays a ``SecretStr`` until the request is built.  ``account`` is how log lines name the account
    (``appid=wx...``): never the secret."""

    path: str
    params: Mapping[str, str]
    secret_param: str
    secret: SecretStr = field(repr=False)
    account: str

    def query(self) -> dict[str, str]:
        return {**self.params, self.secret_param: self.secret.get_secret_value()}


class TencentApi:
    """One account's calls, on an ``httpx.AsyncClient`` it is handed (or makes, and then closes)."""

    def __init__(self, platform: str, api_base: str, fetch: TokenFetch, codes: BodyCodes,
                 client: httpx.AsyncClient | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.platform, self.api_base, self._fetch, self._codes, self._clock = platform, api_base, fetch, codes, clock
        self._client = client or httpx.AsyncClient(timeout=TIMEOUT, trust_env=False)
        self._owned = client is None
        self.tokens = AccessToken(self._grant, margin_s=TOKEN_MARGIN_S, clock=clock)

    async def request(self, path: str, *, params: Mapping[str, str], body: dict | None = None,
                      files: Mapping[str, tuple[str, bytes, str]] | None = None) -> dict:
        """GET ``path`` (or POST ``body`` as UTF-8 JSON, or ``files`` as multipart) and the answer's object;
        a failure raised, translated."""
        url = self.api_base + path
        try:
            if files is not None:
                response = await self._client.post(url, params=params, files=dict(files))
            elif body is None:
                response = await self._client.get(url, params=params)
            else:
                content = json.dumps(body, ensure_ascii=False).encode()  # the platforms show \\uXXXX escapes as typed
                response = await self._client.post(url, params=params, content=content,
                                                   headers={"Content-Type": "application/json; charset=utf-8"})
        except httpx.HTTPError as error:
            why = why_unreachable(error)
            if why is not None:
                raise PeerUnreachable(self.platform, origin(self.api_base), why, check="the network or api_base",
                                      action=path) from None
            raise PeerUnavailable(self.platform, f"{path}: {type(error).__name__}") from None
        parsed = json_body(response.content)
        failed = translate(self.platform, path, response.status_code, response.headers, parsed, codes=self._codes)
        if failed is not None:
            raise failed
        return parsed if isinstance(parsed, dict) else {}

    @property
    def fetched(self) -> int:
        """Tokens fetched since start (``/status`` and the tests read it)."""
        return self.tokens.fetched

    async def token(self, *, stale: str | None = None) -> str:
        """A good ``access_token``; ``stale`` is one the platform just refused, replaced unless another call did."""
        return await self.tokens.get(stale=stale)

    async def _grant(self) -> Grant:
        said = await self.request(self._fetch.path, params=self._fetch.query())
        token, lasts = said.get("access_token"), lifetime(said.get("expires_in"), TOKEN_LIFE_S)
        if not isinstance(token, str) or not token:
            raise PeerUnavailable(self.platform, f"{self._fetch.path}: the answer has no access_token")
        log.info("%s access token fetched %s lasts_s=%s", self.platform, self._fetch.account, lasts)
        return Grant(token, lasts)

    async def call(self, path: str, body: dict) -> dict:
        """POST ``body`` to ``path`` with the token, fetching a new token once if the platform says it is stale."""
        token = await self.token()
        try:
            return await self.request(path, params={"access_token": token}, body=body)
        except PlatformError as error:
            if str(error.code) not in STALE_TOKEN:
                raise
            log.info("%s access token refused, fetching a new one %s code=%s", self.platform, self._fetch.account,
                     error.code)
        return await self.request(path, params={"access_token": await self.token(stale=token)}, body=body)

    async def upload_file(self, path: str, params: Mapping[str, str], field_name: str, name: str, data: bytes,
                     mime: str) -> dict:
        """POST one file as the multipart field ``field_name`` (with the token and ``params``), fetching a new
        token once if the platform says it is stale.  A failure sends nothing: the caller may simply retry."""
        token = await self.token()
        files = {field_name: (name, data, mime)}
        try:
            return await self.request(path, params={"access_token": token, **params}, files=files)
        except PlatformError as error:
            if str(error.code) not in STALE_TOKEN:
                raise
        return await self.request(path, params={"access_token": await self.token(stale=token), **params}, files=files)

    @asynccontextmanager
    async def media(self, path: str, params: Mapping[str, str], *, limit: int, declared_type: str = "",
                    name: str = "") -> AsyncIterator[MediaStream]:
        """Stream one file from ``path`` within ``limit`` bytes; a new token once if the one held is stale."""
        token = await self.token()
        async with AsyncExitStack() as stack:
            try:
                stream = await stack.enter_async_context(self._download(path, token, params, limit, declared_type, name))
            except PlatformError as error:
                if str(error.code) not in STALE_TOKEN:
                    raise
                fresh = await self.token(stale=token)
                stream = await stack.enter_async_context(self._download(path, fresh, params, limit, declared_type, name))
            yield stream

    def _download(self, path: str, token: str, params: Mapping[str, str], limit: int, declared_type: str,
                  name: str) -> AbstractAsyncContextManager[MediaStream]:
        url = f"{self.api_base}{path}?{urlencode({'access_token': token, **params})}"  # never logged: download names no URL
        return download(self._client, url, limit=limit, platform=self.platform, declared_type=declared_type,
                        name=name, codes=self._codes)

    async def close(self) -> None:
        if self._owned:
            await self._client.aclose()
