"""How the store's writes are going: ``ok``, or ``failing`` with the last error.

Why it exists: a full disk (``SQLITE_FULL``), a read-only remount or an I/O error makes
every write fail while reads still work.  Work accepted just before stayed ``pending``
until a restart, while ``/healthz`` said 200.  The writer thread reports each batch
here; the gateway reads it for ``/healthz``, ``/status`` and the metrics, and, when
the state turns back to ``ok`` (``recoveries`` grows), resumes what the failure left
pending, as a start does.

A batch counts as a failure when SQLite itself failed (``sqlite3.DatabaseError`` other
than a constraint or a misuse of the API).  Once failing, only a write that *proves
room* -- the store's probe, which needs many new pages -- turns the state back to
``ok``: on a full disk small writes still fit in the file's free pages, and counting
them as a recovery made the state flap, resuming turns whose answers then could not be
written either (each one a wasted model call).
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import Enum


class StoreState(str, Enum):
    OK = "ok"
    FAILING = "failing"


@dataclass(frozen=True)
class StoreCondition:
    state: StoreState = StoreState.OK
    error: str = ""
    """The last SQLite error while failing ("database or disk is full"); the last one seen, once ok again."""
    since: datetime | None = None
    """When the current state began (None: ok since the start)."""
    failures: int = 0
    """Failed batches since the last successful write."""
    recoveries: int = 0
    """How many times the state went from failing back to ok."""


def is_store_failure(error: BaseException) -> bool:
    """True for SQLite failing (disk full, I/O, read-only, damaged), not for a rejected statement."""
    return isinstance(error, sqlite3.DatabaseError) and not isinstance(
        error, sqlite3.IntegrityError | sqlite3.ProgrammingError | sqlite3.InterfaceError
    )


class StoreHealth:
    """Thread-safe: the writer thread reports, the event loop reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._condition = StoreCondition()

    def failed(self, error: BaseException) -> None:
        with self._lock:
            now = self._condition
            self._condition = replace(
                now, state=StoreState.FAILING, error=str(error)[:300], failures=now.failures + 1,
                since=now.since if now.state is StoreState.FAILING else datetime.now(UTC),
            )

    def wrote(self, *, proves_room: bool) -> None:
        """A batch committed a write; while failing, only one that ``proves_room`` ends the failure."""
        with self._lock:
            now = self._condition
            if now.state is StoreState.FAILING and proves_room:
                self._condition = replace(now, state=StoreState.OK, failures=0, recoveries=now.recoveries + 1,
                                          since=datetime.now(UTC))

    def condition(self) -> StoreCondition:
        with self._lock:
            return self._condition
