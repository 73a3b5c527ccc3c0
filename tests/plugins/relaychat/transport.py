"""HTTP transport to the relay platform: a small client per account, and the error translation.

Each account gets its own ``httpx.AsyncClient`` with a pool of a few
connections (one held by the long poll, one or two for sends), and every
client in the process shares one SSL context.  Both halves matter at a
thousand accounts (see bench/memory.py):

- building an SSL context loads the CA bundle -- ~700 KiB per client; a
  shared context brings a client down to a few KiB;
- one client shared by all accounts instead would put a thousand long polls
  in one connection pool, whose bookkeeping is quadratic in the number of
  waiting requests: start-up of 1,000 accounts took a minute of CPU that way.

Foreign errors are translated here, once, most specific first::

    401/403                  -> AuthFailed
    429                      -> RateLimited(retry_after from the body or Retry-After)
    400 "... not found"      -> NotFound
    400, other 4xx           -> BadRequest
    409 (a newer poller)     -> PeerUnavailable
    5xx, timeouts, resets    -> PeerUnavailable
"""

from __future__ import annotations

import logging
import ssl
from functools import cache
from typing import Any

import certifi
import httpx

from gateway.core.errors import AuthFailed, BadRequest, NotFound, PeerUnavailable, RateLimited

PLATFORM = "relay"
log = logging.getLogger(__name__)


@cache
def shared_ssl_context() -> ssl.SSLContext:
    """The one SSL context of the process (what httpx would build per client)."""
    return ssl.create_default_context(cafile=certifi.where())


def new_client() -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=2, keepalive_expiry=30)
    return httpx.AsyncClient(verify=shared_ssl_context(), limits=limits)


def translate(method: str, response: httpx.Response) -> Exception:
    """The gateway error for a failed Bot API call."""
    try:
        body = response.json()
    except ValueError:
        body = {}
    status = response.status_code
    description = str(body.get("description") or response.reason_phrase or "error")
    where = f"{method}: {description}"
    if status in (401, 403):
        return AuthFailed(PLATFORM, where, code=status)
    if status == 429:
        retry_after = (body.get("parameters") or {}).get("retry_after") or response.headers.get("Retry-After") or 1
        return RateLimited(PLATFORM, float(retry_after), code=429)
    if status == 400 and "not found" in description:
        return NotFound(PLATFORM, where, code=status)
    if status == 409 or status >= 500:
        return PeerUnavailable(PLATFORM, where, code=status)
    return BadRequest(PLATFORM, where, code=status)


async def call(client: httpx.AsyncClient, base_url: str, token: str, method: str, body: dict[str, Any], *, timeout: float = 15.0) -> Any:
    """Call one Bot API method; return its ``result`` or raise a gateway error."""
    url = f"{base_url.rstrip('/')}/bot/{token}/{method}"
    try:
        response = await client.post(url, json=body, timeout=timeout)
    except httpx.TimeoutException as error:
        raise PeerUnavailable(PLATFORM, f"{method}: timed out ({type(error).__name__})") from error
    except httpx.TransportError as error:
        raise PeerUnavailable(PLATFORM, f"{method}: {type(error).__name__}: {error}") from error
    if response.status_code == 200:
        return response.json()["result"]
    raise translate(method, response)
