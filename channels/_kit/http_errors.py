"""An HTTP answer from a platform, translated into the gateway's error tree once.

A channel hands over what it got -- status, headers, parsed JSON body -- and
gets back the :mod:`gateway.errors` class that says what to do, or ``None``
for success.  Translation, most specific first::

    platform code in the body (the channel's table)  -> the kind the table names
    429                                              -> RateLimited(retry_after, scope)
    401                                              -> AuthFailed      (the account's credentials)
    403                                              -> Forbidden       (that target only, see below)
    404                                              -> NotFound
    408, 425, 5xx                                    -> PeerUnavailable
    other 4xx                                        -> BadRequest

**One meaning for 403.** 403 says the platform knows the bot and will not let
it act on *this* target: blocked by the learner, kicked from the group, no
right to post in that channel.  That is permanent for the target and says
nothing about the account, so it is :class:`~gateway.errors.Forbidden` (a
``NotFound``), never ``AuthFailed`` -- which would stop the whole account for a
human because one learner blocked the bot.  401 is the account's credentials.
A platform whose 403 does mean bad credentials says so in its ``overrides``.

**Retry-After in all its forms**, most precise first: a JSON body field
(Discord's ``retry_after`` in fractional seconds, Matrix's ``retry_after_ms``,
Telegram's ``parameters.retry_after``; a channel may name its own fields and
units), ``X-RateLimit-Reset-After`` (fractional seconds), then ``Retry-After``
as delta-seconds (fractional tolerated) or an HTTP-date.  Discord's
``X-RateLimit-Scope: global`` / ``X-RateLimit-Global`` / ``"global": true``
make the limit global.

**Error codes inside 200 bodies**: Slack answers ``{"ok": false, "error":
"ratelimited"}``, WeChat ``{"errcode": 45009}``, Feishu ``{"code": 99991400}``,
all with status 200.  A channel describes where its code lives and what each
means with a :class:`BodyCodes` table; this module does the rest.

A channel on httpx calls :func:`raise_for` with the response; one whose SDK
already parsed the answer calls :func:`translate`, or :func:`status_kind` and
:func:`error_for` when it has only a status.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from enum import Enum
from typing import Any, Literal

import httpx

from gateway.core.errors import (
    AuthFailed,
    BadRequest,
    Forbidden,
    NotFound,
    PeerUnavailable,
    PlatformError,
    RateLimited,
    ReplyWindowClosed,
    Unsupported,
)


class ErrorKind(str, Enum):
    """What a failed answer means, before it becomes an error with a platform and a message."""

    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"
    AUTH_FAILED = "auth_failed"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    BAD_REQUEST = "bad_request"
    UNSUPPORTED = "unsupported"
    REPLY_WINDOW_CLOSED = "reply_window_closed"
    """The reply token or window the send went through is gone (Discord's expired interaction token,
    WeCom's stream past its time): no other status says it, so only a platform code in a channel's table names it."""


STATUS_KINDS: Mapping[int, ErrorKind] = {
    401: ErrorKind.AUTH_FAILED, 403: ErrorKind.FORBIDDEN, 404: ErrorKind.NOT_FOUND, 408: ErrorKind.UNAVAILABLE,
    425: ErrorKind.UNAVAILABLE, 429: ErrorKind.RATE_LIMITED,
}
BODY_RETRY_FIELDS: Mapping[str, float] = {"retry_after": 1.0, "retry_after_ms": 0.001, "parameters.retry_after": 1.0}
"""JSON fields that say how long to wait, each with its unit in seconds (dotted paths reach into objects)."""
FALLBACK_RETRY_S = 1.0
"""The pause when a platform says "slow down" without saying for how long."""


def status_kind(status: int | None, overrides: Mapping[int, ErrorKind] | None = None) -> ErrorKind | None:
    """What an HTTP status means (``None`` for success or no status); ``overrides`` for a platform's own."""
    if status is None or 200 <= status < 400:
        return None
    if overrides and status in overrides:
        return overrides[status]
    if status in STATUS_KINDS:
        return STATUS_KINDS[status]
    return ErrorKind.UNAVAILABLE if status >= 500 else ErrorKind.BAD_REQUEST


def _lookup(body: Any, path: str) -> Any:
    for name in path.split("."):
        if not isinstance(body, Mapping) or name not in body:
            return None
        body = body[name]
    return body


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 and seconds == seconds and seconds != float("inf") else None


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name.lower()), None)
    return value.strip() if value else None


def retry_after(headers: Mapping[str, str], body: Any = None, *, fields: Mapping[str, float] = BODY_RETRY_FIELDS,
                now: float | None = None) -> float | None:
    """Seconds to wait, from the most precise hint the answer carries; ``None`` when it carries none."""
    for path, unit in fields.items():
        seconds = _seconds(_lookup(body, path))
        if seconds is not None:
            return seconds * unit
    reset_after = _seconds(_header(headers, "X-RateLimit-Reset-After"))
    if reset_after is not None:
        return reset_after
    value = _header(headers, "Retry-After")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP-date is GMT by definition; a zone-less one is read as such
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def rate_limit_scope(headers: Mapping[str, str], body: Any = None) -> Literal["chat", "global"]:
    """``global`` when the platform says the limit covers the whole bot (Discord's headers or body)."""
    if (_header(headers, "X-RateLimit-Scope") or "").lower() == "global":
        return "global"
    if (_header(headers, "X-RateLimit-Global") or "").lower() == "true" or _lookup(body, "global") is True:
        return "global"
    return "chat"


@dataclass(frozen=True)
class BodyCodes:
    """Where a platform writes an error into a body (even a 200's) and what each code means.

    ``code_field`` is a dotted path; with ``ok_field`` (Slack's ``ok``), the body failed when that
    field is false, else when the code is present and not one of ``success``.  Codes are compared as
    strings, so ``45009`` and ``"45009"`` are one key.  A code the table does not name means what the
    HTTP status means, or ``default`` when the status is a 200.  ``explained`` words a code in the
    channel's own terms where the platform's message would mislead an operator (WeChat's 45015 says
    "subscription is canceled" when the learner's 48-hour window has closed)."""

    code_field: str
    kinds: Mapping[str, ErrorKind] = field(default_factory=dict)
    success: frozenset[str] = frozenset({"0"})
    ok_field: str | None = None
    message_fields: tuple[str, ...] = ("error_description", "errmsg", "msg", "message", "description", "error")
    default: ErrorKind = ErrorKind.BAD_REQUEST
    explained: Mapping[str, str] = field(default_factory=dict)

    def failure(self, body: Any) -> tuple[str, ErrorKind | None, str] | None:
        """``(code, kind, message)`` when ``body`` reports an error (``kind`` None for a code the table
        does not name), else ``None``."""
        if not isinstance(body, Mapping):
            return None
        raw = _lookup(body, self.code_field)
        if self.ok_field is not None:
            if _lookup(body, self.ok_field) is not False:
                return None
        elif raw is None or str(raw) in self.success:
            return None
        code = "" if raw is None else str(raw)
        message = self.explained.get(code) or next(
            (str(m) for name in self.message_fields if (m := _lookup(body, name)) not in (None, "")), code)
        return code, self.kinds.get(code), message


def error_for(kind: ErrorKind, platform: str, message: str, *, code: str | int | None = None,
              retry_after_s: float | None = None, scope: Literal["chat", "global"] = "chat") -> PlatformError:
    """The gateway error for ``kind``; a rate limit without a pause waits :data:`FALLBACK_RETRY_S`."""
    if kind is ErrorKind.RATE_LIMITED:
        pause = FALLBACK_RETRY_S if retry_after_s is None else retry_after_s
        return RateLimited(platform, pause, code=code if code is not None else 429, scope=scope)
    error_class: type[PlatformError] = {
        ErrorKind.UNAVAILABLE: PeerUnavailable, ErrorKind.AUTH_FAILED: AuthFailed, ErrorKind.FORBIDDEN: Forbidden,
        ErrorKind.NOT_FOUND: NotFound, ErrorKind.BAD_REQUEST: BadRequest, ErrorKind.UNSUPPORTED: Unsupported,
        ErrorKind.REPLY_WINDOW_CLOSED: ReplyWindowClosed,
    }[kind]
    return error_class(platform, message, code=code)


def translate(platform: str, action: str, status: int | None, headers: Mapping[str, str], body: Any = None, *,
              codes: BodyCodes | None = None, overrides: Mapping[int, ErrorKind] | None = None,
              retry_fields: Mapping[str, float] = BODY_RETRY_FIELDS) -> PlatformError | None:
    """The gateway error one answer means, or ``None`` when it succeeded.

    ``body`` is the parsed JSON (or anything else, which carries no codes); ``action`` names the call
    for the message ("chat.postMessage: ratelimited")."""
    if codes is not None and (found := codes.failure(body)) is not None:
        code, named, said = found
        kind = named or status_kind(status, overrides) or codes.default
        wire_code: str | int = code or (status if status is not None else "error")
    else:
        status_meaning = status_kind(status, overrides)
        if status_meaning is None:
            return None
        kind, wire_code = status_meaning, status if status is not None else "error"
        said = next((str(m) for name in ("message", "error_description", "description", "error", "errmsg", "msg")
                     if (m := _lookup(body, name)) not in (None, "") and not isinstance(m, (Mapping, list))),
                    f"HTTP {status}")
    return error_for(kind, platform, f"{action}: {said}"[:300], code=wire_code,
                     retry_after_s=retry_after(headers, body, fields=retry_fields),
                     scope=rate_limit_scope(headers, body))


def json_body(content: bytes) -> Any:
    """The parsed JSON of a body, or ``None`` when it is not JSON (an HTML error page, an empty 204)."""
    try:
        return json.loads(content) if content else None
    except (ValueError, UnicodeDecodeError):
        return None


def raise_for(platform: str, action: str, response: httpx.Response, *, codes: BodyCodes | None = None,
              overrides: Mapping[int, ErrorKind] | None = None,
              retry_fields: Mapping[str, float] = BODY_RETRY_FIELDS) -> Any:
    """The parsed body of an httpx answer that succeeded; the translated gateway error raised otherwise."""
    body = json_body(response.content)
    error = translate(platform, action, response.status_code, response.headers, body, codes=codes,
                      overrides=overrides, retry_fields=retry_fields)
    if error is not None:
        raise error
    return body
