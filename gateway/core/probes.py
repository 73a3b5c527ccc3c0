"""What a probe found: whether an account's or a model's settings work against the real peer.

A probe asks the platform (or the model provider) one harmless question --
Telegram ``getMe``, an IMAP login, Matrix ``whoami``, a one-token completion
-- and reports each thing that stops it from working as a :class:`Problem`:
the trouble in plain words and the fix, never a library's exception text and
never a secret.  ``partners doctor`` prints them; ``doctor --offline`` and
``serve`` use only the problems visible in the settings themselves (an empty
token, a placeholder host), which need no network.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict


class Gravity(str, Enum):
    ERROR = "error"
    """It will not work until fixed."""
    WARNING = "warning"
    """It works, but probably not as meant (a webhook another program set, polling that will remove it)."""


class Problem(BaseModel):
    """One thing that stops (or may stop) an account or a model from working, with its fix."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    message: str
    """What is wrong, in plain words: "Telegram says the token is invalid"."""
    fix: str
    """What to do about it: "copy it again from @BotFather"."""
    gravity: Gravity = Gravity.ERROR


class ProbeResult(BaseModel):
    """The outcome of one probe: what was checked and every problem found (none: it works)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checked: str
    """What the probe reached, for the OK line: "bot @tutor_bot at https://api.telegram.org"."""
    problems: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        return not any(p.gravity is Gravity.ERROR for p in self.problems)

    @classmethod
    def failed(cls, checked: str, message: str, fix: str) -> ProbeResult:
        return cls(checked=checked, problems=(Problem(message=message, fix=fix),))
