"""The PostgreSQL schema of the gateway store, in migrations recorded in ``schema_migrations``.

Why not the SQLite history replayed: that one grew by ``ALTER TABLE`` over ten releases and speaks
SQLite's types (``REAL`` is single precision in PostgreSQL: a ``time.time()`` kept there loses its
seconds).  A PostgreSQL database starts empty, so its first migration is the SQLite schema as it is
*now*, in PostgreSQL's terms, with the same tables and the same column names
(``tests/store/test_postgres_schema.py`` holds the two to that):

- timestamps are ``double precision``;
- the inbox order is an identity column (``seq ... GENERATED ALWAYS AS IDENTITY``), not a rowid;
- the JSON the store looks into (a reply's payload, its sent ids) is ``jsonb``; JSON it only keeps (an
  inbound message, an address) stays ``text``, because ``jsonb`` cannot hold a NUL character and a
  platform's message may carry one: it must be kept as it came;
- flags are ``boolean``, sealed settings ``bytea``.

Each entry is one list of statements; all pending entries run in one transaction under an advisory
lock (:mod:`.engine`), so two nodes starting together migrate once.  Never edit a shipped entry;
append one.  Entry 1 is the core (inbox, outbox, cursors, access, reminders, takeovers); the console's
tables, the activity sums, the stored accounts and the API tokens come in the entry after it.
"""

from __future__ import annotations

SCHEMA_NAME = "gateway store"
"""Its row in ``schema_migrations``."""

MIGRATIONS_TABLE = "CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, version integer NOT NULL)"

MIGRATION_LOCK = 0x6761_7465_7761_79
"""The ``pg_advisory_xact_lock`` key migrations hold ("gateway" in ASCII): one node migrates, the others wait."""

CORE: list[str] = [
    """CREATE TABLE inbound (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        channel text NOT NULL,
        account text NOT NULL,
        event_id text NOT NULL,
        conversation text NOT NULL,
        sender text NOT NULL,
        payload text NOT NULL,
        state text NOT NULL,
        reason text NOT NULL DEFAULT '',
        received_at double precision NOT NULL,
        keep_until double precision NOT NULL,
        UNIQUE (channel, account, event_id)
    )""",
    "CREATE INDEX inbound_open ON inbound (state, seq)",
    "CREATE INDEX inbound_keep ON inbound (keep_until)",
    "CREATE INDEX inbound_by_conversation ON inbound (conversation, received_at)",
    "CREATE INDEX inbound_by_sender ON inbound (channel, account, sender, state)",
    """CREATE TABLE outbox (
        key text PRIMARY KEY,
        channel text NOT NULL,
        account text NOT NULL,
        conversation text NOT NULL DEFAULT '',
        payload jsonb NOT NULL,
        state text NOT NULL,
        preview text,
        preview_unconfirmed boolean NOT NULL DEFAULT false,
        parts_sent integer NOT NULL DEFAULT 0,
        sent jsonb NOT NULL DEFAULT '[]'::jsonb,
        attempts integer NOT NULL DEFAULT 0,
        last_error text,
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL
    )""",
    "CREATE INDEX outbox_open ON outbox (state, created_at)",
    "CREATE INDEX outbox_by_conversation ON outbox (conversation, created_at)",
    """CREATE TABLE cursors (
        channel text NOT NULL,
        account text NOT NULL,
        name text NOT NULL,
        value text NOT NULL,
        keep_until double precision,
        PRIMARY KEY (channel, account, name)
    )""",
    "CREATE INDEX cursors_expiring ON cursors (keep_until) WHERE keep_until IS NOT NULL",
    """CREATE TABLE pairing (
        code text PRIMARY KEY,
        channel text NOT NULL,
        account text NOT NULL,
        sender text NOT NULL,
        display_name text NOT NULL,
        source text NOT NULL DEFAULT '',
        created_at double precision NOT NULL,
        expires_at double precision NOT NULL
    )""",
    "CREATE INDEX pairing_sender ON pairing (channel, account, sender)",
    "CREATE INDEX pairing_source ON pairing (channel, account, source)",
    """CREATE TABLE approved_senders (
        channel text NOT NULL,
        account text NOT NULL,
        sender text NOT NULL,
        approved_at double precision NOT NULL,
        PRIMARY KEY (channel, account, sender)
    )""",
    """CREATE TABLE notices (
        channel text NOT NULL,
        account text NOT NULL,
        sender text NOT NULL,
        last_at double precision NOT NULL,
        PRIMARY KEY (channel, account, sender)
    )""",
    """CREATE TABLE reminders (
        id text PRIMARY KEY,
        channel text NOT NULL,
        account text NOT NULL,
        target text NOT NULL,
        text text NOT NULL,
        due_at double precision NOT NULL,
        state text NOT NULL,
        created_at double precision NOT NULL
    )""",
    "CREATE INDEX reminders_due ON reminders (state, due_at)",
    """CREATE TABLE takeovers (
        code text PRIMARY KEY,
        conversation text NOT NULL UNIQUE,
        partner text NOT NULL,
        target text NOT NULL,
        reason text NOT NULL,
        started_at double precision NOT NULL,
        locale text NOT NULL DEFAULT ''
    )""",
]

MIGRATIONS: list[list[str]] = [CORE]
"""In order; the version of a database is how many of them it has run."""
