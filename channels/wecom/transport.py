"""The wire to WeCom's AI bot: wecom-aibot-sdk's ``WSClient``, and the one place its failures are translated.

The SDK is imported by :func:`new_client` alone, so this module (and the channel's) load without it.

**One reconnect layer.**  The SDK would dial again by itself, up to ten times
with its own backoff.  It is built here with one attempt (``max_reconnect_attempts=1``,
``max_auth_failure_attempts=1``), so a dropped or refused connection ends the
channel's ``run`` and the supervisor's restart -- the one backoff every channel
shares, with the account's state saying why -- dials again (ADR
``wecom-ai-bot-channel``).  **One liveness check.**  The SDK's own ``ping``
frame, every ``heartbeat_interval``, is the only one: it switches websockets'
keepalive off, and two unanswered pings close the socket, which is a drop like
any other.

**Errors.**  The SDK reports a refused reply only as an exception whose text
carries ``errcode=N, errmsg=...``; that is read back into the ack body here and
handed to the kit's code table, most specific first::

    errcode 846608 (stream update expired),
    846605 (req_id no longer valid)             -> ReplyWindowClosed
    errcode 45009 (over the call limit)         -> RateLimited
    errcode -1 (system busy)                    -> PeerUnavailable
    no ack in the SDK's 5 s, socket not open    -> PeerUnavailable
    any other errcode                           -> BadRequest
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from channels._kit.http_errors import BodyCodes, ErrorKind, translate
from channels.wecom.config import AiBotMode
from gateway.core.errors import PeerUnavailable, PlatformError

PLATFORM = "wecom"
STREAM_EXPIRED = "846608"
CODES = BodyCodes(code_field="errcode", kinds={
    STREAM_EXPIRED: ErrorKind.REPLY_WINDOW_CLOSED,
    "846605": ErrorKind.REPLY_WINDOW_CLOSED,  # invalid req_id: the message can no longer be answered
    "45009": ErrorKind.RATE_LIMITED,
    "40001": ErrorKind.AUTH_FAILED,
    "-1": ErrorKind.UNAVAILABLE,  # system busy: try again later
})
ACK_ERROR = re.compile(r"errcode=(-?\d+), errmsg=(.*)$", re.DOTALL)
log = logging.getLogger(__name__)

if TYPE_CHECKING:  # pragma: no cover
    from wecom_aibot_sdk import WSClient


class SdkLog:
    """The SDK's logger interface (``debug/info/warn/error(message, *args)``) onto this module's logger.

    Its frames appear only at DEBUG (they carry message text); its own notices at their level."""

    def _say(self, level: int, message: str, *args: Any) -> None:
        if log.isEnabledFor(level):
            log.log(level, "wecom sdk: %s", " ".join([str(message), *map(str, args)])[:300])

    def debug(self, message: str, *args: Any) -> None:
        self._say(logging.DEBUG, message, *args)

    def info(self, message: str, *args: Any) -> None:
        self._say(logging.DEBUG, message, *args)  # connection chatter; the channel logs its own INFO lines

    def warn(self, message: str, *args: Any) -> None:
        self._say(logging.WARNING, message, *args)

    def error(self, message: str, *args: Any) -> None:
        self._say(logging.WARNING, message, *args)  # the channel raises what matters; this is context


def new_client(mode: AiBotMode, *, heartbeat_s: float) -> WSClient:
    """A client that dials once and never again by itself (see the module docstring).

    The SDK is imported here, not with the module: a self-built app account never reaches this."""
    from wecom_aibot_sdk import WSClient

    return WSClient(mode.bot_id, mode.secret.get_secret_value(), ws_url=mode.ws_url,
                    max_reconnect_attempts=1, max_auth_failure_attempts=1,
                    heartbeat_interval=int(heartbeat_s * 1000), logger=SdkLog())


def translate_error(error: Exception, action: str) -> PlatformError:
    """The gateway error one failed SDK call means."""
    found = ACK_ERROR.search(str(error))
    if found is not None:
        body = {"errcode": int(found.group(1)), "errmsg": found.group(2).strip()}
        translated = translate(PLATFORM, action, None, {}, body, codes=CODES)
        if translated is not None:
            return translated
    if isinstance(error, ConnectionError):
        return PeerUnavailable(PLATFORM, f"{action}: the long connection is not open")
    said = str(error)
    if "timeout" in said.lower():
        return PeerUnavailable(PLATFORM, f"{action}: no ack from WeCom in time")
    return PeerUnavailable(PLATFORM, f"{action}: {type(error).__name__}: {said[:120]}")


async def call(action: str, operation: Awaitable[Any]) -> Any:
    """Await one SDK call; raise its failure as a gateway error."""
    try:
        return await operation
    except PlatformError:
        raise
    except Exception as error:  # the SDK raises bare Exception for every refusal
        raise translate_error(error, action) from error
