"""What a part of the SQLite store kept in a module of its own needs of the store: its writer thread.

The console's rows, the transcripts and the activity sums each keep their SQL beside their row types
(:mod:`gateway.store.console`, :mod:`.transcripts`, :mod:`.activity`, :mod:`.accounts`, :mod:`.tokens`) and are
mixed into :class:`gateway.store.sqlite.SqliteStore`, which runs every operation on its one writer
thread, so a part never opens a connection of its own.  :class:`OnWriter` says so once: a part
subclasses it and calls ``self._run(op)``; the store's own ``_run`` is the one that runs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Protocol, TypeVar

T = TypeVar("T")


class OnWriter(Protocol):
    """A part of :class:`~gateway.store.sqlite.SqliteStore`: it runs its operations on the store's writer thread."""

    async def _run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``op`` on the writer thread, in a transaction, and return what it returns."""
        ...
