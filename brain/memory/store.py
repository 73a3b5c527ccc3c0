"""``memory.db``: one SQLite file for people and every memory layer, one connection, one lock.

The same pattern as the session log (``brain.session_log``): operations are
short plain functions of the connection, run on a worker thread under the
lock, each in its own transaction -- so a merge of two people, which touches
identities and three memory tables, happens entirely or not at all.

The schema, in one place:

- ``persons``: a learner (or a teacher) as a person, inside one teacher scope;
- ``identities``: (teacher, channel, account, user) -> person;
- ``link_codes``: short-lived codes for ``/link``; ``forget_requests``: a pending ``/forget``;
- ``trace``: append-only observed facts per scope, each with its provenance;
- ``preferences``: what the idempotent preference gate let in, per scope;
- ``documents``: consolidated Markdown per scope, its footnote -> trace id map and
  the trace ids it covers (partner notes are documents without a trace).

A scope is three columns everywhere: ``scope_kind``, ``teacher``, ``scope_key``
(see :mod:`brain.memory.scopes`).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS persons (
    id TEXT PRIMARY KEY, teacher TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS identities (
    teacher TEXT NOT NULL, channel TEXT NOT NULL, account TEXT NOT NULL, user TEXT NOT NULL,
    person TEXT NOT NULL, display_name TEXT NOT NULL DEFAULT '', since REAL NOT NULL,
    PRIMARY KEY (teacher, channel, account, user));
CREATE INDEX IF NOT EXISTS identities_by_person ON identities (person);
CREATE TABLE IF NOT EXISTS link_codes (
    code TEXT PRIMARY KEY, teacher TEXT NOT NULL, person TEXT NOT NULL, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS forget_requests (
    person TEXT PRIMARY KEY, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS trace (
    id INTEGER PRIMARY KEY, scope_kind TEXT NOT NULL, teacher TEXT NOT NULL, scope_key TEXT NOT NULL,
    text TEXT NOT NULL, topic TEXT, norm TEXT NOT NULL,
    partner TEXT NOT NULL, conversation TEXT NOT NULL, event_id TEXT NOT NULL, speaker TEXT NOT NULL,
    at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS trace_by_scope ON trace (scope_kind, teacher, scope_key, id);
CREATE INDEX IF NOT EXISTS trace_by_speaker ON trace (speaker);
CREATE TABLE IF NOT EXISTS preferences (
    id INTEGER PRIMARY KEY, scope_kind TEXT NOT NULL, teacher TEXT NOT NULL, scope_key TEXT NOT NULL,
    text TEXT NOT NULL, topic TEXT, norm TEXT NOT NULL,
    partner TEXT NOT NULL, conversation TEXT NOT NULL, event_id TEXT NOT NULL, speaker TEXT NOT NULL,
    at REAL NOT NULL,
    UNIQUE (scope_kind, teacher, scope_key, norm));
CREATE INDEX IF NOT EXISTS preferences_by_speaker ON preferences (speaker);
CREATE TABLE IF NOT EXISTS documents (
    scope_kind TEXT NOT NULL, teacher TEXT NOT NULL, scope_key TEXT NOT NULL,
    markdown TEXT NOT NULL, footnotes TEXT NOT NULL, covered TEXT NOT NULL,
    author TEXT NOT NULL, updated_at REAL NOT NULL,
    PRIMARY KEY (scope_kind, teacher, scope_key));
"""


class MemoryStore:
    """The connection to ``memory.db``; ``run`` executes one operation as one transaction."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA secure_delete=ON")  # erased memory is overwritten, not left in free pages
            conn.executescript(SCHEMA)
            self._conn = conn
        return self._conn

    def run_sync(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = operation(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

    async def run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self.run_sync, operation)

    async def checkpoint(self) -> None:
        """Fold the write-ahead log into the file and empty it, so nothing erased lingers in the WAL."""

        def fold() -> None:
            with self._lock:
                self._connect().execute("PRAGMA wal_checkpoint(TRUNCATE)")

        await asyncio.to_thread(fold)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
