"""The sent ledger: which idempotency keys the SMTP server has already accepted.

SMTP has no idempotency key, so the channel keeps its own record.  The
outbound path records a part as sent only after ``send`` returned; a crash
between the server's ``250`` and that record makes the part go out again after
the restart.  Writing the key here right after the ``250`` (a committed SQLite
row, before ``send`` returns) shrinks that window to the few microseconds
between the reply arriving and the commit -- and a repeated send of a key the
ledger knows is answered without submitting anything.

Rows are kept for the platform's redelivery horizon (30 days), then pruned.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

KEEP_S = 30 * 24 * 3600


class SentLedger:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("CREATE TABLE IF NOT EXISTS sent (key TEXT PRIMARY KEY, message_id TEXT NOT NULL, at REAL NOT NULL)")
        self._db.execute("DELETE FROM sent WHERE at < ?", (time.time() - KEEP_S,))

    def sent(self, key: str) -> str | None:
        """The Message-ID the server accepted under this key, or None."""
        row = self._db.execute("SELECT message_id FROM sent WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def record(self, key: str, message_id: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO sent (key, message_id, at) VALUES (?, ?, ?)", (key, message_id, time.time()))

    def close(self) -> None:
        self._db.close()
