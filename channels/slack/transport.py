"""The wire to Slack: slack_sdk's ``AsyncWebClient``, and the one place its errors are translated.

Only one layer retries.  slack_sdk's client would retry connection errors
(and, if asked, 429s) by itself; it is built here with no retry handlers, so a
failed call surfaces at once and the gateway's outbound path -- which paces
the chat's bucket by ``Retry-After`` and records each attempt -- is the single
retry layer (docs/adr/0028-slack-channel.md).  Translation, most specific
first::

    HTTP 429 + Retry-After, or error "ratelimited"      -> RateLimited(retry_after)
    invalid_auth, not_authed, token_revoked, HTTP 401   -> AuthFailed
    channel_not_found, message_not_found, HTTP 404 ...  -> NotFound
    unknown_method, not_allowed_token_type, missing_scope -> Unsupported
    internal_error, service_unavailable, HTTP 5xx       -> PeerUnavailable
    the server cannot be reached                        -> PeerUnreachable, naming api_base
    any other {"ok": false, "error": ...}               -> BadRequest

Slack reports most failures in a 200 body (``{"ok": false, "error":
"invalid_auth"}``); the message names the method, Slack's error string and
the HTTP status, as in ``slack says invalid_auth: chat.postMessage (HTTP 200)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from channels._kit.http_errors import retry_after
from channels.slack.config import SlackConfig
from gateway.core.errors import (
    AuthFailed,
    BadRequest,
    GatewayError,
    NotFound,
    PeerUnavailable,
    PeerUnreachable,
    RateLimited,
    Unsupported,
)
from gateway.endpoints import origin, why_unreachable

PLATFORM = "slack"
AUTH = frozenset({"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive", "no_permission"})
GONE = frozenset({"channel_not_found", "message_not_found", "thread_not_found", "not_in_channel", "is_archived",
                  "user_not_found", "file_not_found", "cant_update_message"})
UNSUPPORTED = frozenset({"unknown_method", "not_allowed_token_type", "missing_scope", "method_deprecated",
                         "feature_not_enabled", "not_allowed", "team_not_allowed"})
DOWN = frozenset({"internal_error", "fatal_error", "service_unavailable", "request_timeout"})
DEFAULT_RETRY_AFTER_S = 1.0
"""When a 429 carries no Retry-After (Slack always sends one): wait as long as chat.postMessage's 1 per second."""


def new_client(config: SlackConfig) -> AsyncWebClient:
    """A Web API client on ``config``'s endpoint, retrying nothing itself (see the module docstring).

    It keeps one aiohttp session, so calls reuse their connections: without one, slack_sdk opens a
    session, and a TCP connection, per call.  Built inside the event loop; ``close_client`` ends it."""
    session = aiohttp.ClientSession(trust_env=False)
    return AsyncWebClient(token=config.bot_token.get_secret_value(), base_url=config.api_base, retry_handlers=[],
                          session=session)


async def close_client(client: AsyncWebClient) -> None:
    if client.session is not None and not client.session.closed:
        await client.session.close()


def translate(error: Exception, method: str, endpoint: str) -> GatewayError:
    if isinstance(error, SlackApiError):
        status = error.response.status_code
        data = error.response.data if isinstance(error.response.data, dict) else {}
        code = str(data.get("error") or f"HTTP {status}")
        where = f"{method} (HTTP {status})"
        if status == 429 or code == "ratelimited":
            wait = retry_after(dict(error.response.headers or {}))  # Retry-After in any of its forms (the kit)
            return RateLimited(PLATFORM, DEFAULT_RETRY_AFTER_S if wait is None else wait, code=429)
        if code in AUTH or status in (401, 403):
            return AuthFailed(PLATFORM, f"{where}: reinstall the app or copy its bot token again", code=code)
        if code in GONE or status == 404:
            return NotFound(PLATFORM, where, code=code)
        if code in UNSUPPORTED:
            return Unsupported(PLATFORM, where, code=code)
        if code in DOWN or status >= 500:
            return PeerUnavailable(PLATFORM, where, code=code)
        return BadRequest(PLATFORM, where, code=code)
    why = why_unreachable(error) or ("no answer in time" if isinstance(error, asyncio.TimeoutError) else None)
    if why is not None:
        return PeerUnreachable(PLATFORM, origin(endpoint), why, check="the network or api_base", action=method)
    return PeerUnavailable(PLATFORM, f"{method}: {type(error).__name__}")


async def call(method: str, operation: Awaitable[Any], endpoint: str) -> Any:
    """Await one slack_sdk call; raise its failure as a gateway error."""
    try:
        return await operation
    except (TimeoutError, SlackClientError, aiohttp.ClientError, OSError) as error:
        raise translate(error, method, endpoint) from error

