"""The wire to Discord: a discord.py ``Client`` on the configured endpoints, and the one place its errors are translated.

**Who owns rate limits.**  discord.py retries a 429 itself (it sleeps
``retry_after`` and tries again, up to five times) and retries 500/502/504/524
with its own backoff; the gateway's outbound path also retries every
:class:`TransientError` after pacing it.  Two layers would double every wait
and hide the 429 from the pacer, so discord.py's *retry* is switched off: the
client's documented ``http_trace`` hook sees each response before discord.py
does and raises :class:`Refused` for a 429 or a retryable 5xx, which leaves
discord.py's loop at once (it only catches ``OSError``).  One 429 from Discord
is then exactly one :class:`RateLimited` and one paced retry by the outbound
path (docs/adr/0027-discord-channel.md).  discord.py's bucket bookkeeping stays:
it reads ``X-RateLimit-Remaining``/``Reset-After`` from successful answers and
holds the *next* request of an exhausted bucket until it resets, which only
ever avoids a 429 and never repeats a request.

Translation, most specific first::

    Refused 429 (body retry_after, global)      -> RateLimited(retry_after), scope global or chat
    Refused 5xx                                 -> PeerUnavailable
    PrivilegedIntentsRequired (close 4014)      -> AuthFailed: enable the intent, or message_content: false
    LoginFailure, HTTP 401, close 4004          -> AuthFailed: the token is wrong or was reset
    HTTP 404, code 10015 or 10062               -> ReplyWindowClosed: the interaction token is dead
    HTTP 403 (missing access or permissions)    -> Forbidden (a NotFound): that channel is closed to the bot
    HTTP 404                                    -> NotFound
    other HTTP 4xx (400, 413 too large)         -> BadRequest
    no connection at all                        -> PeerUnreachable, naming the endpoint
    a dropped socket, a timeout                 -> PeerUnavailable
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable
from typing import Any, TypeVar

import aiohttp
import discord
import yarl

from channels._kit.http_errors import ErrorKind, error_for, status_kind
from channels.discord.config import DiscordConfig
from gateway.core.errors import AuthFailed, BadRequest, GatewayError, PeerUnavailable, PeerUnreachable, RateLimited
from gateway.endpoints import origin, why_unreachable

PLATFORM = "discord"
RETRIED_BY_US = frozenset({429, 500, 502, 503, 504, 524})
CODES = {10015: ErrorKind.REPLY_WINDOW_CLOSED, 10062: ErrorKind.REPLY_WINDOW_CLOSED}
"""Discord's JSON codes that mean more than their 404: Unknown Webhook and Unknown Interaction, which is what
an interaction token answers once it expired (15 min) or was invalidated (no initial response within 3 s)."""
T = TypeVar("T")
TOKEN_RE = re.compile(r"[\w-]{23,28}\.[\w-]{6,7}\.[\w-]{27,}")
"""What a bot token looks like; it never reaches a log line or the status page through an error text."""


class Refused(Exception):
    """Discord answered 429 or a 5xx; raised from the trace hook so discord.py does not retry it."""

    def __init__(self, status: int, retry_after: float, *, is_global: bool, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status, self.retry_after, self.is_global, self.message = status, retry_after, is_global, message


async def _on_response(session: aiohttp.ClientSession, context: Any, params: aiohttp.TraceRequestEndParams) -> None:
    response = params.response
    if response.status not in RETRIED_BY_US or "Upgrade" in params.headers:
        return  # the Gateway's websocket upgrade stays discord.py's: it reconnects and resumes the session itself
    body: Any = {}
    try:
        body = await response.json(content_type=None)
    except (ValueError, aiohttp.ClientError):
        pass
    body = body if isinstance(body, dict) else {}
    header = response.headers.get("Retry-After")
    retry_after = body.get("retry_after", header if header is not None else 1.0)
    is_global = bool(body.get("global")) or response.headers.get("X-RateLimit-Scope") == "global"
    raise Refused(response.status, float(retry_after), is_global=is_global, message=str(body.get("message") or response.reason))


def trace() -> aiohttp.TraceConfig:
    config = aiohttp.TraceConfig()
    config.on_request_end.append(_on_response)
    return config


def point_at(config: DiscordConfig) -> None:
    """Aim discord.py at the configured endpoints: both are class attributes in discord.py, one per process."""
    discord.http.Route.BASE = config.api_base.rstrip("/")
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(config.gateway_url)


def intents_for(config: DiscordConfig) -> discord.Intents:
    """Guilds (channels, threads), guild and DM messages; message content only when asked for (privileged)."""
    intents = discord.Intents.none()
    intents.guilds = intents.guild_messages = intents.dm_messages = True
    intents.message_content = config.message_content
    return intents


def new_client(config: DiscordConfig) -> discord.Client:
    point_at(config)
    return discord.Client(intents=intents_for(config), http_trace=trace(), max_messages=200,
                          chunk_guilds_at_startup=False, guild_ready_timeout=0.5)


def redact(text: str) -> str:
    return TOKEN_RE.sub("<token>", text)


def translate(error: BaseException, action: str, *, endpoint: str = "") -> GatewayError:
    """The gateway error for a failed discord.py call (any token in the text redacted)."""
    if isinstance(error, Refused):
        if error.status == 429:
            return RateLimited(PLATFORM, error.retry_after, code=429, scope="global" if error.is_global else "chat")
        return PeerUnavailable(PLATFORM, f"{action}: {error.message}", code=error.status)
    if isinstance(error, discord.PrivilegedIntentsRequired):
        return AuthFailed(PLATFORM, "the MESSAGE CONTENT intent is not enabled for this application: turn it on at "
                          "Developer Portal > your app > Bot > Privileged Gateway Intents, or set message_content: false",
                          code=4014)
    if isinstance(error, discord.LoginFailure) or (isinstance(error, discord.ConnectionClosed) and error.code == 4004):
        return AuthFailed(PLATFORM, f"{action}: the bot token is wrong or was reset; copy it again from the Bot page", code=401)
    if isinstance(error, discord.HTTPException):
        where = f"{action}: {redact(error.text or str(error))}"
        kind = CODES.get(error.code) or status_kind(error.status) or ErrorKind.BAD_REQUEST  # 403: that chat only
        if kind is ErrorKind.AUTH_FAILED:
            where += ": the bot token is wrong or was reset"
        return error_for(kind, PLATFORM, where, code=error.status)
    if (why := why_unreachable(error)) is not None:
        return PeerUnreachable(PLATFORM, origin(endpoint) if endpoint else "Discord", why,
                               check="the network, or api_base and gateway_url", action=action)
    if isinstance(error, (discord.ConnectionClosed, discord.GatewayNotFound, aiohttp.ClientError, OSError, TimeoutError)):
        return PeerUnavailable(PLATFORM, f"{action}: {redact(str(error)) or type(error).__name__}")
    return BadRequest(PLATFORM, f"{action}: {redact(str(error))}")


async def call(action: str, operation: Awaitable[T], *, endpoint: str = "") -> T:
    """Await one discord.py call; raise its failure as a gateway error."""
    try:
        return await operation
    except asyncio.CancelledError:
        raise
    except (Refused, discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError) as error:
        raise translate(error, action, endpoint=endpoint) from error
