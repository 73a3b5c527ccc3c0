"""Schema migrations, applied in order and recorded in ``PRAGMA user_version``.

Each entry is a list of portable statements (no SQLite-only syntax beyond
what PostgreSQL also accepts), so the same history can later seed a
PostgreSQL schema.  Never edit a shipped migration; append a new one.
"""

from __future__ import annotations

import sqlite3

MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE inbound (
            seq INTEGER PRIMARY KEY,
            channel TEXT NOT NULL,
            account TEXT NOT NULL,
            event_id TEXT NOT NULL,
            conversation TEXT NOT NULL,
            sender TEXT NOT NULL,
            payload TEXT NOT NULL,
            state TEXT NOT NULL,
            reason TEXT NOT NULL DEFAULT '',
            received_at REAL NOT NULL,
            keep_until REAL NOT NULL
        )""",
        "CREATE UNIQUE INDEX inbound_dedup ON inbound (channel, account, event_id)",
        "CREATE INDEX inbound_open ON inbound (state, seq)",
        "CREATE INDEX inbound_keep ON inbound (keep_until)",
        """CREATE TABLE outbox (
            key TEXT PRIMARY KEY,
            channel TEXT NOT NULL,
            account TEXT NOT NULL,
            payload TEXT NOT NULL,
            state TEXT NOT NULL,
            preview TEXT,
            preview_unconfirmed INTEGER NOT NULL DEFAULT 0,
            parts_sent INTEGER NOT NULL DEFAULT 0,
            sent TEXT NOT NULL DEFAULT '[]',
            attempts INTEGER NOT NULL DEFAULT 0,
            last_error TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        )""",
        "CREATE INDEX outbox_open ON outbox (state, created_at)",
        """CREATE TABLE cursors (
            channel TEXT NOT NULL, account TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,
            PRIMARY KEY (channel, account, name)
        )""",
        """CREATE TABLE pairing (
            code TEXT PRIMARY KEY,
            channel TEXT NOT NULL, account TEXT NOT NULL, sender TEXT NOT NULL, display_name TEXT NOT NULL,
            created_at REAL NOT NULL, expires_at REAL NOT NULL
        )""",
        "CREATE INDEX pairing_sender ON pairing (channel, account, sender)",
        """CREATE TABLE approved_senders (
            channel TEXT NOT NULL, account TEXT NOT NULL, sender TEXT NOT NULL, approved_at REAL NOT NULL,
            PRIMARY KEY (channel, account, sender)
        )""",
        """CREATE TABLE notices (
            channel TEXT NOT NULL, account TEXT NOT NULL, sender TEXT NOT NULL, last_at REAL NOT NULL,
            PRIMARY KEY (channel, account, sender)
        )""",
    ],
    [
        """CREATE TABLE reminders (
            id TEXT PRIMARY KEY,
            channel TEXT NOT NULL,
            account TEXT NOT NULL,
            target TEXT NOT NULL,
            text TEXT NOT NULL,
            due_at REAL NOT NULL,
            state TEXT NOT NULL,
            created_at REAL NOT NULL
        )""",
        "CREATE INDEX reminders_due ON reminders (state, due_at)",
        "CREATE INDEX inbound_by_conversation ON inbound (conversation, received_at)",
        """CREATE TABLE takeovers (
            code TEXT PRIMARY KEY,
            conversation TEXT NOT NULL UNIQUE,
            partner TEXT NOT NULL,
            target TEXT NOT NULL,
            reason TEXT NOT NULL,
            started_at REAL NOT NULL
        )""",
    ],
    [
        # Pending pairing codes are bounded per source (InboundMessage.source), not only per account.
        "ALTER TABLE pairing ADD COLUMN source TEXT NOT NULL DEFAULT ''",
        "CREATE INDEX pairing_source ON pairing (channel, account, source)",
    ],
]


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema up to date; return the resulting version."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    if version > len(MIGRATIONS):
        raise RuntimeError(
            f"database schema version {version} is newer than this release knows ({len(MIGRATIONS)}); upgrade partners-gateway"
        )
    for number in range(version, len(MIGRATIONS)):
        with conn:
            for statement in MIGRATIONS[number]:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number + 1}")
    return len(MIGRATIONS)
