"""Secrets at rest: the channel-account settings the console stores, sealed with a key from the environment.

The console keeps the tokens a teacher pastes (a Telegram bot token, Slack's tokens) in ``gateway.db``.
A copy of that file -- a backup, a disk sent for repair -- must not open the bots, so each account's
settings are one Fernet token (``cryptography``: AES-128-CBC with HMAC-SHA256, a timestamp, an
authenticated format; nothing here is hand-rolled).  The key is never in the data dir: it is
``PARTNERS_SECRET_KEY`` in the gateway's environment, 32 random bytes in urlsafe base64, as
``partners console new-key`` prints one (or ``python -c "from cryptography.fernet import Fernet;
print(Fernet.generate_key().decode())"``).

Keys rotate: put the new key in ``PARTNERS_SECRET_KEY`` and the previous one in
``PARTNERS_SECRET_KEY_OLD``; what the old key sealed still opens (``MultiFernet``), and every account
is sealed again with the new key when the gateway starts, after which the old one can go.

Every failure is one :class:`~gateway.core.errors.ConfigError` naming the variable and the fix --
a key that is not a key, a stored value no given key opens -- never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from gateway.core.errors import ConfigError
from gateway.redaction import register_secret

KEY_ENV = "PARTNERS_SECRET_KEY"
OLD_KEY_ENV = "PARTNERS_SECRET_KEY_OLD"
MAKE_ONE = f"make one with `partners console new-key` and set {KEY_ENV} in the gateway's environment"


def new_key() -> str:
    """A fresh key, as ``PARTNERS_SECRET_KEY`` takes it (urlsafe base64 of 32 random bytes)."""
    return Fernet.generate_key().decode("ascii")


def _fernet(value: str, variable: str) -> Fernet:
    try:
        return Fernet(value.strip().encode("ascii"))
    except (ValueError, UnicodeEncodeError):  # binascii.Error is a ValueError
        raise ConfigError(f"{variable} is not a secret key (it must be 32 bytes in urlsafe base64, 44 characters)",
                          fix=MAKE_ONE) from None


class SecretBox:
    """Seals and opens byte strings with the current key, opening with the old one too while keys rotate."""

    def __init__(self, key: str, old: str | None = None) -> None:
        keys = [_fernet(key, KEY_ENV)] + ([_fernet(old, OLD_KEY_ENV)] if old else [])
        for value, variable in ((key, KEY_ENV), (old, OLD_KEY_ENV)):
            register_secret(value, variable)  # the key is a secret like any other: no log line may show it
        self._box = MultiFernet(keys)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SecretBox | None:
        """The box the environment's keys make; None when ``PARTNERS_SECRET_KEY`` is unset or empty."""
        env = os.environ if environ is None else environ
        key = env.get(KEY_ENV, "").strip()
        if not key:
            return None
        return cls(key, env.get(OLD_KEY_ENV, "").strip() or None)

    def seal(self, plain: bytes) -> bytes:
        return self._box.encrypt(plain)

    def open(self, sealed: bytes, *, what: str) -> bytes:
        """The plain bytes; a :class:`ConfigError` when no key given opens them (``what`` names the value)."""
        try:
            return self._box.decrypt(sealed)
        except InvalidToken:
            raise ConfigError(f"{KEY_ENV} does not open {what} (it was sealed with another key)",
                              fix=f"set {KEY_ENV} to the key the accounts were added with; after changing keys, "
                                  f"put the previous one in {OLD_KEY_ENV}") from None

    def reseal(self, sealed: bytes, *, what: str) -> bytes:
        """The same plain bytes sealed with the current key (for a rotation); ConfigError as :meth:`open`."""
        try:
            return self._box.rotate(sealed)
        except InvalidToken:
            self.open(sealed, what=what)
            raise  # pragma: no cover - open raised
