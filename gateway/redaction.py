"""Secrets never reach a log line, whichever library wrote it.

Libraries log what they hold: python-telegram-bot logs its API URL, which
carries the bot token, and the ``setWebhook`` parameters, which carry the
webhook secret; httpx logs every URL it calls; an exception raised with a URL
in it carries the token into a traceback.  The gateway cannot edit those
libraries, so it masks the values instead.

Every secret the process knows is registered here once: each ``env:NAME``
setting as the config resolves it (``gateway.configfile`` subscribes
:func:`register_secret` to ``gateway.core.config.on_secret_resolved``), and each secret a
channel obtains at run time (a Matrix access token from a password login) by
the channel calling :func:`register_secret`.  :func:`protect_logging` then
puts :func:`scrub` in logging's record factory, so every record of every
logger is cleaned once, when it is made, before any handler -- present or
added later (uvicorn configures its own) -- formats it: the message after its
``%`` arguments are applied, the exception text and the stack.

A value is masked as it was registered and in the spellings it takes on its
way into a log line: percent-encoded in a URL, JSON- or repr-escaped in a
dumped structure.  Values shorter than :data:`MIN_LENGTH` are not masked:
masking ``"ab"`` would blank every word holding those letters, and a secret
that short protects nothing anyway.

This module imports only the standard library: the CLI installs it before it
knows which command runs (see ``gateway.cli.group``).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pydantic import SecretStr

MASK = "[redacted]"
MIN_LENGTH = 4
"""Shorter values are not masked (see the module docstring)."""


@dataclass(frozen=True)
class Registered:
    """One secret the process holds, and what kind it is -- the kind may be shown, never the value."""

    value: str
    kind: str


class SecretRegistry:
    """The secrets this process holds; thread-safe, since channels register from their own tasks and threads.

    The lock is re-entrant because logging can call back into the registry on the thread that holds
    it: a garbage collection that runs while :meth:`entries` or :meth:`pattern` allocates may finalise
    an asyncio transport, whose ``__del__`` logs, and every log record is scrubbed through
    :meth:`pattern`.  With a plain lock that thread waited on itself and the whole process froze.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._kinds: dict[str, str] = {}
        self._pattern: re.Pattern[str] | None = None

    def register(self, value: str, kind: str) -> None:
        if len(value) < MIN_LENGTH:
            return
        with self._lock:
            if value not in self._kinds:
                self._kinds[value] = kind
                self._pattern = None

    def entries(self) -> list[Registered]:
        with self._lock:  # from a copy: a registration from a finaliser must not change what is being read
            return [Registered(value, kind) for value, kind in self._kinds.copy().items()]

    def pattern(self) -> re.Pattern[str] | None:
        """One alternation of every spelling of every secret, longest first; None while none is registered."""
        with self._lock:
            if self._pattern is None and self._kinds:
                spellings = {s for value in self._kinds.copy() for s in spellings_of(value) if len(s) >= MIN_LENGTH}
                self._pattern = re.compile("|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True)))
            return self._pattern


def spellings_of(value: str) -> set[str]:
    """The forms a value takes on its way into a log line: as is, in a URL, in JSON, in a repr of str or bytes."""
    import json  # here, not at the top: only a first registration needs them, not every command's start-up
    from urllib.parse import quote, quote_plus

    return {
        value,
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        repr(value.encode())[2:-1],
    }


REGISTRY = SecretRegistry()


def register_secret(value: str | SecretStr | None, kind: str = "secret") -> None:
    """Mask ``value`` in every log line from now on.  ``kind`` names it in reports ("telegram token")."""
    if value is None:
        return
    text = value if isinstance(value, str) else value.get_secret_value()
    REGISTRY.register(text, kind)


KEYED = (
    r"""(?P<key>["']?\b[\w-]*?(?:token|password|passwd|secret|api_key|apikey)["']?"""
    r"""\s*[:=]\s*(?P<quote>["']?))(?P<value>[^"'\s,;&}\[\])]+)"""
)
"""A value under a key that names a secret (``access_token``, ``smtp_password``, ``webhook_secret``...), in a
dumped dict, JSON or a query string: ``'access_token': 'syt_...'``.  It masks what nobody could register in
time -- a token in the very response that hands it out, which matrix-nio logs at debug while it validates
the login response, before the channel sees it."""
BEARER = r"(?P<key>\bBearer\s+)(?P<value>[A-Za-z0-9._~+/=-]{8,})"
"""The credential of an ``Authorization: Bearer ...`` header."""


@functools.cache
def _by_key() -> tuple[re.Pattern[str], ...]:
    """Compiled on first use, not at import: every ``partners`` command imports this module."""
    return re.compile(KEYED, re.IGNORECASE), re.compile(BEARER, re.IGNORECASE)


def _keep_key(match: re.Match[str]) -> str:
    return f"{match['key']}{MASK}"


def redact(text: str) -> str:
    """``text`` with every registered secret, and every value under a secret's key, replaced by :data:`MASK`."""
    if not text:
        return text
    pattern = REGISTRY.pattern()
    if pattern is not None:
        text = pattern.sub(MASK, text)
    for by_key in _by_key():
        text = by_key.sub(_keep_key, text)
    return text


def scrub(record: logging.LogRecord) -> logging.LogRecord:
    """Clean one record in place: message (after its arguments), exception text, stack."""
    try:
        message = record.getMessage()
    except (TypeError, ValueError, KeyError):  # arguments that do not fit the format: logging reports that itself
        message = None
    if message is not None:
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    if record.exc_text:
        record.exc_text = redact(record.exc_text)
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    return record


class _ScrubbingFactory:
    """logging's record factory, wrapped so each record is scrubbed as it is made."""

    def __init__(self, make: Callable[..., logging.LogRecord]) -> None:
        self.make = make

    def __call__(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        return scrub(self.make(*args, **kwargs))


def protect_logging() -> None:
    """Scrub every log record of this process from now on; calling it again changes nothing."""
    current = logging.getLogRecordFactory()
    if not isinstance(current, _ScrubbingFactory):
        logging.setLogRecordFactory(_ScrubbingFactory(current))
