"""The one error tree of the gateway.

Foreign errors (SDK exceptions, HTTP status codes, platform error codes) are
translated once, at a channel's boundary, into these classes -- most specific
first -- and nothing above the channel ever sees a platform exception::

    GatewayError
    ├── ConfigError                  bad or missing configuration; names file, field, fix
    ├── ChannelUnavailable           a channel cannot be loaded (missing extra, bad config)
    ├── TransientError               try again later
    │   ├── RateLimited              the platform said slow down (carries retry_after)
    │   └── PeerUnavailable          5xx, timeouts, dropped sockets
    │       └── PeerUnreachable      no connection at all: refused, no such name, TLS; names the endpoint
    └── PermanentError               retrying will not help
        ├── AuthFailed               401/403, revoked token
        ├── Unsupported              the platform cannot do this (edit, media kind)
        ├── ReplyWindowClosed        the reply token or window expired
        ├── NotFound                 chat or message is gone
        │   └── Forbidden            403: the bot may not act in that chat (blocked, kicked, no right)
        ├── BadRequest               the platform rejected our payload
        └── TooLarge                 a file over the size limit (declared, or counted as it arrived)
    InvalidEvent                     an inbound event we cannot decode (logged, dropped with reason)
    ForgedRequest                    an inbound webhook whose signature does not verify (with a reason)

A message names who spoke and the platform's code, e.g.
``telegram says 429: retry after 3 s``.  A policy drop is not an error; it is
a reason string recorded with the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


class GatewayError(Exception):
    """Root of every error the gateway raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a configuration file: where, what, and how to fix it."""

    field: str | None
    message: str
    fix: str | None = None

    def describe(self) -> str:
        text = f"{self.field}: {self.message}" if self.field else self.message
        return f"{text} (fix: {self.fix})" if self.fix else text


class ConfigError(GatewayError):
    """A configuration a command cannot run with; names the file, the field and the fix.

    One file can hold several problems: ``problems`` lists them all, so a teacher
    corrects everything in one pass rather than one error per run.  ``message``,
    ``field`` and ``fix`` describe the first; with several, ``message`` lists them all.
    """

    def __init__(self, message: str, *, file: str | None = None, field: str | None = None, fix: str | None = None):
        self.file = file
        self.problems: tuple[Problem, ...] = (Problem(field, message, fix),)
        self.message, self.field, self.fix = message, field, fix
        super().__init__(self._text())

    @classmethod
    def of(cls, problems: Sequence[Problem], *, file: str | None = None) -> ConfigError:
        """One error for every problem found in ``file`` (at least one)."""
        first, *rest = problems
        error = cls(first.message, file=file, field=first.field, fix=first.fix)
        if rest:
            error.problems = (first, *rest)
            error.field, error.fix = None, None
            error.message = f"{len(error.problems)} problems:" + "".join(f"\n  {p.describe()}" for p in error.problems)
            error.args = (error._text(),)
        return error

    def _text(self) -> str:
        if len(self.problems) > 1:
            return f"{self.file}: {self.message}" if self.file else self.message
        where = ":".join(p for p in (self.file, self.field) if p)
        text = f"{where}: {self.message}" if where else self.message
        return f"{text} (fix: {self.fix})" if self.fix else text


class ChannelUnavailable(GatewayError):
    """A channel that cannot run here, with the reason an operator can act on."""


class PlatformError(GatewayError):
    """An error a platform reported; ``platform`` and ``code`` say who and what."""

    def __init__(self, platform: str, message: str, *, code: str | int | None = None):
        self.platform, self.code, self.detail = platform, code, message
        said = f"{platform} says {code}: {message}" if code is not None else f"{platform}: {message}"
        super().__init__(said)


class TransientError(PlatformError):
    """Worth retrying after a pause."""


class RateLimited(TransientError):
    def __init__(
        self, platform: str, retry_after: float, *, code: str | int | None = 429, scope: Literal["chat", "global"] = "chat"
    ):
        self.retry_after = max(0.0, float(retry_after))
        self.scope = scope
        super().__init__(platform, f"retry after {self.retry_after:g} s", code=code)


class PeerUnavailable(TransientError):
    """The platform is down, slow or dropped the connection."""


class PeerUnreachable(PeerUnavailable):
    """The platform's server could not be reached at all; says where, why in plain words, and what to check.

    ``why`` comes from :func:`gateway.endpoints.why_unreachable` ("connection refused"); the message reads
    ``cannot reach https://api.telegram.org (connection refused): check the network or api_url``."""

    def __init__(self, platform: str, endpoint: str, why: str, *, check: str, action: str | None = None):
        self.endpoint, self.why, self.check = endpoint, why, check
        prefix = f"{action}: " if action else ""
        super().__init__(platform, f"{prefix}cannot reach {endpoint} ({why}): check {check}")


class PermanentError(PlatformError):
    """Retrying the same request will fail the same way."""


class AuthFailed(PermanentError):
    pass


class Unsupported(PermanentError):
    pass


class ReplyWindowClosed(PermanentError):
    pass


class NotFound(PermanentError):
    pass


class Forbidden(NotFound):
    """HTTP 403: the platform knows the bot but will not let it act on *that* target (blocked by the
    learner, kicked from the group, no right to post in the channel).

    One meaning everywhere: permanent for that target, never a failure of the whole account --
    credentials that stopped working are 401, :class:`AuthFailed`, which stops the account for a
    human.  A :class:`NotFound` because, for the outbound path, a chat the bot may not speak in is
    as good as gone."""


class BadRequest(PermanentError):
    pass


def human_size(size: int) -> str:
    """A size as a reader says it: "640 bytes", "10.0 KB", "25.0 MB"."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


class TooLarge(PermanentError):
    """A file over the limit, by its declared size or by what arrived (a ``Content-Length`` may lie).

    ``str(error.detail)`` is the short reason the model reads: "too large (25.0 MB > 20.0 MB)"."""

    def __init__(self, platform: str, limit: int, size: int | None = None):
        self.limit, self.size = limit, size
        shown = f"{human_size(size)} > {human_size(limit)}" if size is not None else f"over {human_size(limit)}"
        super().__init__(platform, f"too large ({shown})")


class InvalidEvent(GatewayError):
    """An inbound event that cannot be decoded; it is logged and dropped with this reason."""


ForgeryReason = Literal["missing_header", "malformed", "bad_signature", "stale", "replayed", "bad_token"]
"""Why an inbound request was refused: a header or parameter absent, a value that cannot be one,
a signature that does not verify, a timestamp outside the window, a signature seen before, or a
shared verify token that does not match (answered 403, as Meta's challenge asks; the rest 401)."""


class ForgedRequest(GatewayError):
    """An inbound request whose signature or secret does not verify; ``reason`` says which check failed.

    The HTTP app answers it with 401 (403 for ``bad_token``) and logs the reason, never a traceback;
    ``detail`` is for the log and never holds the secret or the expected signature."""

    def __init__(self, detail: str, *, reason: ForgeryReason = "bad_signature") -> None:
        self.detail, self.reason = detail, reason
        super().__init__(f"{reason}: {detail}")
