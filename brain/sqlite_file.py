"""One SQLite file, one connection, one lock: the shape of every file the brain keeps.

The session log, the usage ledger and the memory store each own a small SQLite
file (WAL, ``secure_delete`` so erased rows are overwritten rather than left in
free pages).  Their operations are short, so a lock around one connection, run
through ``asyncio.to_thread``, is simpler and faster than a pool.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import ClassVar


class SqliteFile:
    schema: ClassVar[str] = ""
    """``CREATE ... IF NOT EXISTS`` statements run when the file is first opened."""

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
            conn.execute("PRAGMA secure_delete=ON")
            conn.executescript(self.schema)
            self._conn = conn
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
