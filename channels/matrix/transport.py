"""The nio client of one account, and the one place Matrix errors become gateway errors.

nio retries 429s and timeouts by itself unless told not to; the gateway's
outbound path already retries every channel's sends, so the client is built
with ``max_limit_exceeded=0`` and ``max_timeouts=0`` -- one layer of retries,
not two.

A connection that fails is said in plain words with the homeserver's address
("cannot reach https://matrix.example.org (connection refused)"), not as
aiohttp's "Cannot connect to host ... ssl:default [...]": the client's
``send``, which every request passes, knows the homeserver and words it there.

Translation, most specific first: the ``errcode`` by the table below, else the
status by the kit's meanings (``channels._kit.http_errors``) -- except that a
Matrix 403 still stops the account, as it always has here::

    M_LIMIT_EXCEEDED / 429                      -> RateLimited(retry_after_ms / 1000)
    M_UNKNOWN_TOKEN, M_MISSING_TOKEN,
    M_FORBIDDEN, M_USER_DEACTIVATED / 401, 403  -> AuthFailed
    the homeserver cannot be reached            -> PeerUnreachable, naming it and the fix
    5xx, other connection errors, timeouts      -> PeerUnavailable
    M_NOT_FOUND / 404                           -> NotFound
    M_BAD_JSON, M_NOT_JSON, M_TOO_LARGE, other  -> BadRequest
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any, TypeVar

import aiohttp
from nio import AsyncClient, AsyncClientConfig, ErrorResponse

from channels._kit.http_errors import ErrorKind, error_for, status_kind
from gateway.core.errors import PeerUnavailable, PeerUnreachable, PlatformError
from gateway.endpoints import origin, why_unreachable

PLATFORM = "matrix"
ERRCODES = {
    "M_LIMIT_EXCEEDED": ErrorKind.RATE_LIMITED, "M_UNKNOWN_TOKEN": ErrorKind.AUTH_FAILED,
    "M_MISSING_TOKEN": ErrorKind.AUTH_FAILED, "M_FORBIDDEN": ErrorKind.AUTH_FAILED,
    "M_USER_DEACTIVATED": ErrorKind.AUTH_FAILED, "M_NOT_FOUND": ErrorKind.NOT_FOUND,
}
STATUS_MEANINGS = {403: ErrorKind.AUTH_FAILED}
"""Matrix's 403 is M_FORBIDDEN, which this channel has always read as the account's trouble."""
NEW_TOKEN_CODES = {"M_UNKNOWN_TOKEN", "M_MISSING_TOKEN"}
log = logging.getLogger(__name__)
T = TypeVar("T")


class _Client(AsyncClient):
    """nio's client, with a failed connection translated where the homeserver's address is known."""

    async def send(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().send(*args, **kwargs)
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            why = why_unreachable(error)
            if why is None:
                raise
            raise PeerUnreachable(PLATFORM, origin(self.homeserver), why, check="the network and homeserver") from error


def new_client(homeserver: str, user_id: str, device_id: str | None) -> AsyncClient:
    config = AsyncClientConfig(
        max_limit_exceeded=0, max_timeouts=0, encryption_enabled=False, store_sync_tokens=False, request_timeout=30,
    )
    return _Client(homeserver.rstrip("/"), user_id, device_id=device_id or "", config=config)


def http_status(response: ErrorResponse) -> int | None:
    transport = getattr(response, "transport_response", None)
    return getattr(transport, "status", None)


def translate(action: str, response: ErrorResponse) -> PlatformError:
    """The gateway error for a nio error response."""
    status = http_status(response)
    errcode = response.status_code or ""
    where = f"{action}: {errcode or 'error'} {response.message or ''}".strip()
    code = status or errcode or None
    kind = ERRCODES.get(errcode) or status_kind(status, STATUS_MEANINGS) or ErrorKind.BAD_REQUEST
    if kind is ErrorKind.RATE_LIMITED:
        return error_for(kind, PLATFORM, where, code=status or 429, retry_after_s=(response.retry_after_ms or 1000) / 1000)
    if errcode in NEW_TOKEN_CODES:
        where += ": log the bot in again and export the new access token"
    return error_for(kind, PLATFORM, where, code=code)


async def call(action: str, request: Awaitable[T]) -> T:
    """Await one nio request; return its response or raise the translated gateway error."""
    try:
        response: Any = await request
    except (aiohttp.ClientError, TimeoutError, OSError) as error:
        raise PeerUnavailable(PLATFORM, f"{action}: {type(error).__name__}: {error}") from error
    result = response[0] if isinstance(response, tuple) else response  # upload answers (response, keys)
    if isinstance(result, ErrorResponse):
        raise translate(action, result)
    return response
