"""The wire to the Bot API: python-telegram-bot's ``Bot``, and the one place its errors are translated.

The channel uses PTB at the ``Bot`` layer, not its ``Application``/``Updater``:
the Updater confirms updates (advances the offset) as soon as it has fetched
them, before anything is durable, and the gateway must confirm only after
``sink.accept`` returned.

PTB's own error mapping folds every 5xx into ``NetworkError`` and loses the
status code, which the gateway's messages name ("telegram says 503: ...").  So
the request class below (PTB's documented ``BaseRequest`` seam) raises
:class:`BotApiError` with the status for non-2xx answers -- except 429, which
PTB turns into ``RetryAfter`` itself.  Translation, most specific first::

    RetryAfter (429, parameters.retry_after)    -> RateLimited(retry_after), per chat
    ChatMigrated (400, migrate_to_chat_id)      -> ChatMoved(new_chat): the group is a supergroup now
    404 "method not found" (an older server)    -> Unsupported
    400 "... not found"                         -> NotFound
    any other status                            -> the kit's meaning (channels._kit.http_errors), where
                                                   Telegram's own differ: 404 is a bad token (AuthFailed),
                                                   409 a webhook or another poller (PeerUnavailable);
                                                   so 401 AuthFailed, 403 (blocked by the user, kicked)
                                                   Forbidden for that chat, 5xx PeerUnavailable, other 4xx BadRequest
    the server cannot be reached (Unreachable)  -> PeerUnreachable, naming api_url and the fix
    TimedOut, NetworkError                      -> PeerUnavailable

A connection that fails is said in plain words with the endpoint
("cannot reach https://api.telegram.org (connection refused)"), never as
httpx's "All connection attempts failed": the request class knows the
endpoint, so it words the failure there, once (see gateway.endpoints).
"""

from __future__ import annotations

import json
import re
import warnings
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from telegram import Bot
from telegram.error import ChatMigrated, InvalidToken, NetworkError, RetryAfter, TelegramError, TimedOut
from telegram.request import HTTPXRequest, RequestData
from telegram.warnings import PTBDeprecationWarning

from channels._kit.http_errors import ErrorKind, error_for, status_kind
from channels.telegram.config import CLOUD_API, TelegramConfig
from gateway.core.errors import (
    AuthFailed,
    BadRequest,
    GatewayError,
    NotFound,
    PeerUnavailable,
    PeerUnreachable,
    PlatformError,
    RateLimited,
    Unsupported,
)
from gateway.endpoints import origin, why_unreachable

if TYPE_CHECKING:
    from telegram._utils.types import ODVInput  # PTB's own name for "a value, None, or DEFAULT_NONE"

PLATFORM = "telegram"
STATUS_MEANINGS = {404: ErrorKind.AUTH_FAILED, 409: ErrorKind.UNAVAILABLE}
"""Where the Bot API's statuses mean something else than everywhere: 404 is a token it does not know."""


class BotApiError(TelegramError):
    """A non-2xx Bot API answer with its HTTP status kept."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status, self.description = status, description


class ChatMoved(NotFound):
    """The group was upgraded to a supergroup: it lives on under ``new_chat``, and the old id takes nothing more.

    A ``NotFound`` to anyone who does not look closer (the old chat is gone for the bot); the channel
    looks closer, remembers the move and sends again to ``new_chat`` (see channels.telegram.moves)."""

    def __init__(self, method: str, new_chat: int) -> None:
        super().__init__(PLATFORM, f"{method}: the group was upgraded to a supergroup, now chat {new_chat}", code=400)
        self.new_chat = new_chat


class Unreachable(NetworkError):
    """The Bot API server could not be reached; says which server and why, in plain words."""

    def __init__(self, endpoint: str, why: str) -> None:
        super().__init__(f"cannot reach {endpoint} ({why})")
        self.endpoint, self.why = endpoint, why


class StatusKeepingRequest(HTTPXRequest):
    def __init__(self, *, endpoint: str = CLOUD_API, **options: Any) -> None:
        super().__init__(**options)
        self.endpoint = origin(endpoint)

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = HTTPXRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = HTTPXRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = HTTPXRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = HTTPXRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        try:
            status, payload = await super().do_request(url, method, request_data, read_timeout, write_timeout,
                                                       connect_timeout, pool_timeout)
        except NetworkError as error:  # TimedOut too; the URL holds the token, so only the endpoint is named
            why = why_unreachable(error) or ("no answer in time" if isinstance(error, TimedOut) else None)
            if why is None:
                raise
            raise Unreachable(self.endpoint, why) from error
        if 200 <= status < 300 or status == 429 or _migrated(payload):
            return status, payload  # PTB reads retry_after and migrate_to_chat_id into its own errors
        try:
            description = str(json.loads(payload).get("description") or "")
        except (ValueError, AttributeError):
            description = ""
        raise BotApiError(status, description or payload[:200].decode("utf-8", "replace") or f"HTTP {status}")


def _migrated(payload: bytes) -> bool:
    try:
        parameters = json.loads(payload).get("parameters") or {}
    except (ValueError, AttributeError):
        return False
    return isinstance(parameters, dict) and isinstance(parameters.get("migrate_to_chat_id"), int)


def new_bot(config: TelegramConfig, *, poll_timeout: float) -> Bot:
    """A PTB Bot on ``config``'s endpoints; the long poll gets its own small connection pool."""
    calls = StatusKeepingRequest(endpoint=config.api_url, connection_pool_size=4, read_timeout=20.0, write_timeout=20.0,
                                 connect_timeout=10.0, pool_timeout=10.0, httpx_kwargs={"trust_env": False})
    polls = StatusKeepingRequest(endpoint=config.api_url, connection_pool_size=1, read_timeout=poll_timeout + 10.0,
                                 connect_timeout=10.0, httpx_kwargs={"trust_env": False})
    try:
        return Bot(config.token.get_secret_value(), base_url=config.bot_url, base_file_url=config.download_url,
                   request=calls, get_updates_request=polls)
    except InvalidToken as error:  # an empty token: no request can fix it, so the account waits for a human
        raise AuthFailed(PLATFORM, "the bot token is empty: copy it from @BotFather", code=401) from error


# PTB 22.2+ warns, whenever a RetryAfter is made or read, that retry_after will become a timedelta.
# retry_seconds below takes either type, so the warning says nothing to us or to an operator.
warnings.filterwarnings("ignore", message=r".*`retry_after` will be of type `datetime\.timedelta`", category=PTBDeprecationWarning)


def retry_seconds(error: RetryAfter) -> float:
    value = error.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


TOKEN_RE = re.compile(r"\d{3,}:[A-Za-z0-9_-]{20,}")
"""What a bot token looks like; it must never reach a log line or the status page through an error text."""


def redact(text: str) -> str:
    return TOKEN_RE.sub("<token>", text)


def translate(error: TelegramError, method: str) -> GatewayError:
    """The gateway error for a failed Bot API call (any token in the error's text redacted)."""
    translated = _translate(error, method)
    if isinstance(translated, PlatformError):
        translated.detail = redact(translated.detail)
        translated.args = (redact(str(translated)),)
    return translated


def _translate(error: TelegramError, method: str) -> GatewayError:
    if isinstance(error, RetryAfter):
        return RateLimited(PLATFORM, retry_seconds(error), code=429, scope="chat")
    if isinstance(error, ChatMigrated):
        return ChatMoved(method, int(error.new_chat_id))
    if isinstance(error, BotApiError):
        status, where = error.status, f"{method}: {error.description}"
        if status == 404 and "method" in error.description.lower():
            return Unsupported(PLATFORM, f"{method}: this Bot API server does not know the method", code=status)
        if status == 400 and "not found" in error.description.lower():
            return NotFound(PLATFORM, where, code=status)
        kind = status_kind(status, STATUS_MEANINGS) or ErrorKind.BAD_REQUEST
        if kind is ErrorKind.AUTH_FAILED:
            where += ": the token is invalid or revoked; copy it again from @BotFather"
        return error_for(kind, PLATFORM, where, code=status)
    if isinstance(error, Unreachable):
        return PeerUnreachable(PLATFORM, error.endpoint, error.why, check="the network or api_url", action=method)
    if isinstance(error, InvalidToken):
        return AuthFailed(PLATFORM, f"{method}: {error.message}", code=401)
    if isinstance(error, (TimedOut, NetworkError)):
        return PeerUnavailable(PLATFORM, f"{method}: {type(error).__name__}: {error.message}")
    return BadRequest(PLATFORM, f"{method}: {error.message}")


async def call(method: str, operation: Any) -> Any:
    """Await one PTB call; raise its failure as a gateway error."""
    try:
        return await operation
    except TelegramError as error:
        raise translate(error, method) from error
