"""The sent ledger: which idempotency keys the SMTP server has already accepted.

SMTP has no idempotency key, so the channel keeps its own record.  The
outbound path records a part as sent only after ``send`` returned; a crash
between the server's ``250`` and that record makes the part go out again after
the restart.  Writing the key here right after the ``250`` (a committed SQLite
row, before ``send`` returns) shrinks that window to the few microseconds
between the reply arriving and the commit -- and a repeated send of a key the
ledger knows is answered without submitting anything.

Rows are kept for the platform's redelivery horizon (``redelivery_horizon_s``
in platforms.toml: 30 days), then pruned.
"""

from __future__ import annotations

import time
from pathlib import Path

from gateway.store.schema import Schema, open_database

LEDGER_FILE = "sent.sqlite3"
LEDGER_SCHEMA = Schema(
    "email sent ledger",
    ("CREATE TABLE IF NOT EXISTS sent (key TEXT PRIMARY KEY, message_id TEXT NOT NULL, at REAL NOT NULL)",),
    fix="stop the gateway and move the file aside (mails sent but not yet marked delivered may go out again)",
)


class SentLedger:
    def __init__(self, path: Path, keep_s: float) -> None:
        self._db = open_database(path, (LEDGER_SCHEMA,), pragmas=("journal_mode=WAL", "synchronous=FULL"))
        self._db.execute("DELETE FROM sent WHERE at < ?", (time.time() - keep_s,))

    def sent(self, key: str) -> str | None:
        """The Message-ID the server accepted under this key, or None."""
        row = self._db.execute("SELECT message_id FROM sent WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def record(self, key: str, message_id: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO sent (key, message_id, at) VALUES (?, ?, ?)", (key, message_id, time.time()))

    def close(self) -> None:
        self._db.close()
