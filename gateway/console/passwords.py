"""Console passwords: argon2id hashes (``argon2-cffi``, RFC 9106's parameters), checked off the event loop.

A check costs tens of milliseconds of CPU and 64 MiB on purpose, so it runs in a worker thread: a
sign-in never stalls the learners' web chat on the same loop.  A username nobody has is checked
against a hash of a random password made once per process, so an unknown user takes as long as a
wrong password and the answer's timing says nothing of who exists.
"""

from __future__ import annotations

import asyncio
import secrets
from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

MIN_CHARS = 10
"""Shorter passwords are refused; length is what makes a password hard to guess (NIST SP 800-63B asks 8 at least)."""
MAX_CHARS = 1024
"""A longer one is refused before hashing: nobody types more, and hashing megabytes is a cheap attack."""

_HASHER = PasswordHasher()


def acceptable(password: str) -> bool:
    """Whether ``password`` is long enough to keep and short enough to hash (the texts' ``password_rule``)."""
    return MIN_CHARS <= len(password) <= MAX_CHARS


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


@cache
def _decoy() -> str:
    return _HASHER.hash(secrets.token_urlsafe(24))


def _verify(stored: str | None, password: str) -> bool:
    try:
        return _HASHER.verify(stored if stored is not None else _decoy(), password[:MAX_CHARS]) and stored is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


async def verify(stored: str | None, password: str) -> bool:
    """Whether ``password`` matches the ``stored`` hash; ``None`` (no such user) costs the same and is False."""
    return await asyncio.to_thread(_verify, stored, password)
