"""Schema migrations, applied in order and recorded in ``PRAGMA user_version``.

Each entry is a list of portable statements (no SQLite-only syntax beyond
what PostgreSQL also accepts), so the same history can later seed a
PostgreSQL schema.  Never edit a shipped migration; append a new one.

They run through :mod:`gateway.store.schema`, all pending ones in one
transaction.  ``IF NOT EXISTS`` (added later, same resulting schema) lets a
file that a crash of an earlier release left half-migrated be completed.
"""

from __future__ import annotations

from gateway.store.schema import Schema

MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE IF NOT EXISTS inbound (
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
        "CREATE UNIQUE INDEX IF NOT EXISTS inbound_dedup ON inbound (channel, account, event_id)",
        "CREATE INDEX IF NOT EXISTS inbound_open ON inbound (state, seq)",
        "CREATE INDEX IF NOT EXISTS inbound_keep ON inbound (keep_until)",
        """CREATE TABLE IF NOT EXISTS outbox (
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
        "CREATE INDEX IF NOT EXISTS outbox_open ON outbox (state, created_at)",
        """CREATE TABLE IF NOT EXISTS cursors (
            channel TEXT NOT NULL, account TEXT NOT NULL, name TEXT NOT NULL, value TEXT NOT NULL,
            PRIMARY KEY (channel, account, name)
        )""",
        """CREATE TABLE IF NOT EXISTS pairing (
            code TEXT PRIMARY KEY,
            channel TEXT NOT NULL, account TEXT NOT NULL, sender TEXT NOT NULL, display_name TEXT NOT NULL,
            created_at REAL NOT NULL, expires_at REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS pairing_sender ON pairing (channel, account, sender)",
        """CREATE TABLE IF NOT EXISTS approved_senders (
            channel TEXT NOT NULL, account TEXT NOT NULL, sender TEXT NOT NULL, approved_at REAL NOT NULL,
            PRIMARY KEY (channel, account, sender)
        )""",
        """CREATE TABLE IF NOT EXISTS notices (
            channel TEXT NOT NULL, account TEXT NOT NULL, sender TEXT NOT NULL, last_at REAL NOT NULL,
            PRIMARY KEY (channel, account, sender)
        )""",
    ],
    [
        """CREATE TABLE IF NOT EXISTS reminders (
            id TEXT PRIMARY KEY,
            channel TEXT NOT NULL,
            account TEXT NOT NULL,
            target TEXT NOT NULL,
            text TEXT NOT NULL,
            due_at REAL NOT NULL,
            state TEXT NOT NULL,
            created_at REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS reminders_due ON reminders (state, due_at)",
        "CREATE INDEX IF NOT EXISTS inbound_by_conversation ON inbound (conversation, received_at)",
        """CREATE TABLE IF NOT EXISTS takeovers (
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
        "CREATE INDEX IF NOT EXISTS pairing_source ON pairing (channel, account, source)",
    ],
    [
        # The learner's platform locale when a conversation was handed to the teacher, so the hand-back
        # notice speaks their language; a takeover from before reads '' (the partner's language).
        "ALTER TABLE takeovers ADD COLUMN locale TEXT NOT NULL DEFAULT ''",
    ],
    [
        # The teacher console (gateway.console, ADR 0036): who may sign in, their sessions, and the one-time
        # link that creates the first administrator.  Session ids and setup tokens are kept only as SHA-256
        # digests, so a copy of the file opens no session; passwords only as argon2 hashes.
        """CREATE TABLE IF NOT EXISTS console_users (
            username TEXT PRIMARY KEY,
            display_name TEXT NOT NULL,
            role TEXT NOT NULL,
            teacher TEXT,
            password_hash TEXT NOT NULL,
            created_at REAL NOT NULL,
            disabled INTEGER NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE IF NOT EXISTS console_sessions (
            id_digest TEXT PRIMARY KEY,
            username TEXT NOT NULL REFERENCES console_users (username) ON DELETE CASCADE,
            csrf TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL
        )""",
        "CREATE INDEX IF NOT EXISTS console_sessions_expiry ON console_sessions (expires_at)",
        """CREATE TABLE IF NOT EXISTS console_setup_tokens (
            digest TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL,
            used_at REAL
        )""",
    ],
    [
        # Each reply row names its conversation (Address.conversation_key), so the teacher console can show
        # a conversation's transcript -- what was heard and what was said -- from the store alone.  Rows
        # written before read '' and stay out of transcripts (finished ones are pruned within a week).
        "ALTER TABLE outbox ADD COLUMN conversation TEXT NOT NULL DEFAULT ''",
        "CREATE INDEX IF NOT EXISTS outbox_by_conversation ON outbox (conversation, created_at)",
    ],
    [
        # The console's channels and dashboard pages (gateway.store.activity, ADR 0036 addendum): accounts an operator
        # disabled, kept across restarts, and per-hour sums of what the gateway counts, for the charts.
        """CREATE TABLE IF NOT EXISTS channel_switches (
            channel TEXT NOT NULL,
            account TEXT NOT NULL,
            disabled_by TEXT NOT NULL,
            disabled_at REAL NOT NULL,
            PRIMARY KEY (channel, account)
        )""",
        """CREATE TABLE IF NOT EXISTS activity_hourly (
            hour INTEGER NOT NULL,
            partner TEXT NOT NULL,
            channel TEXT NOT NULL,
            account TEXT NOT NULL,
            measure TEXT NOT NULL,
            label TEXT NOT NULL,
            value REAL NOT NULL,
            PRIMARY KEY (hour, partner, channel, account, measure, label)
        )""",
    ],
    [
        # Channel accounts added in the console (gateway.store.accounts, ADR 0040): the partner bound to the whole
        # account, who added it, and its settings as one value sealed with PARTNERS_SECRET_KEY (never in the clear).
        """CREATE TABLE IF NOT EXISTS channel_accounts (
            channel TEXT NOT NULL,
            account TEXT NOT NULL,
            partner TEXT NOT NULL,
            settings BLOB NOT NULL,
            created_by TEXT NOT NULL,
            created_at REAL NOT NULL,
            PRIMARY KEY (channel, account)
        )""",
    ],
    [
        # The console's API tokens (gateway.store.tokens, ADR 0041).  Kept only as SHA-256 digests; a token goes
        # with its user.
        """CREATE TABLE IF NOT EXISTS console_tokens (
            id TEXT PRIMARY KEY,
            digest TEXT NOT NULL UNIQUE,
            username TEXT NOT NULL REFERENCES console_users (username) ON DELETE CASCADE,
            name TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_used_at REAL,
            expires_at REAL
        )""",
        "CREATE INDEX IF NOT EXISTS console_tokens_user ON console_tokens (username, created_at)",
    ],
    [
        # Cursors that expire (CursorStore.put's keep_s): per-message notes such as a WhatsApp message's delivery
        # state are pruned, not kept for good.  NULL: kept until overwritten, as every cursor was before.
        "ALTER TABLE cursors ADD COLUMN keep_until REAL",
        "CREATE INDEX IF NOT EXISTS cursors_expiring ON cursors (keep_until) WHERE keep_until IS NOT NULL",
    ],
]


GATEWAY_SCHEMA = Schema("gateway store", tuple(";\n".join(statements) for statements in MIGRATIONS))
"""The schema of ``gateway.db`` (its version is also ``PRAGMA user_version``, as earlier releases read it)."""
