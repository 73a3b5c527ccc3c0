"""Who is using a data directory: running gateways share it, offline maintenance needs it alone.

A gateway (``serve`` or ``chat``) holds a *shared* lock on ``<data_dir>/gateway.lock``
while it runs.  Commands that rewrite a learner's data behind the gateway's back
(``partners people link|unlink|forget``, ``partners memory delete|edit``) take the
lock *exclusively* and refuse while any gateway runs: a turn in progress would
otherwise finish writing under a key the command just moved or erased.

A running gateway also names its data dir by :func:`identity` in ``/healthz``, so
``doctor`` and ``serve`` can tell "this data dir's gateway already holds the port"
from "another gateway does" without the answer revealing a path.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = "gateway.lock"


class DataDirBusy(Exception):
    """A gateway is running on this data directory."""


def _open(data_dir: Path) -> int:
    data_dir.mkdir(parents=True, exist_ok=True)
    return os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)


def hold_shared(data_dir: Path) -> int:
    """Mark a running gateway; returns the descriptor to pass to :func:`release`."""
    fd = _open(data_dir)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def release(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


@contextmanager
def exclusive(data_dir: Path) -> Iterator[None]:
    """Hold the data directory alone, or raise :class:`DataDirBusy` at once."""
    fd = _open(data_dir)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataDirBusy(str(data_dir)) from None
        yield
    finally:
        os.close(fd)


def identity(data_dir: Path) -> str:
    """A short, stable name of a data directory that does not reveal its path."""
    return hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]


def in_use(data_dir: Path) -> bool:
    """Whether a gateway holds this data directory now; never creates it."""
    try:
        fd = os.open(data_dir / LOCK_NAME, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases a lock we got
    return False
