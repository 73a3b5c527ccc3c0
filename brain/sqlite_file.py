"""One SQLite file, one connection, one lock: the shape of every file the brain keeps.

The session log, the usage ledger and the memory store each own a small SQLite
file (WAL, ``secure_delete`` so erased rows are overwritten rather than left in
free pages).  Their operations are short, so a lock around one connection, run
through ``asyncio.to_thread``, is simpler and faster than a pool.  The schema is
applied by :func:`gateway.store.schema.open_database`, atomically, like every
other SQLite file of the project.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import ClassVar

from gateway.store.schema import Schema, open_database


class SqliteFile:
    schema: ClassVar[Schema]
    """The file's tables, migrated when it is first opened (several classes may share a file)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            pragmas = ("journal_mode=WAL", "synchronous=NORMAL", "secure_delete=ON")
            self._conn = open_database(self.path, (self.schema,), pragmas=pragmas, timeout=10.0)
        return self._conn

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
