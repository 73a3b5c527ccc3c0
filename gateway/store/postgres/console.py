"""The console's users, sessions and setup link on PostgreSQL: :class:`~gateway.store.console.ConsoleStore` for a fleet.

The rows and what they mean are those of :mod:`gateway.store.console` (its dataclasses, :func:`digest`,
:func:`normal_username`); only the SQL differs, because N nodes may run it at once.  The one live setup
link is a unique partial index, so issuing one is a single upsert, and redeeming it marks the link
used and creates the first administrator in one statement: two nodes redeeming the same link (or two
links) never make two administrators.  The columns are SQLite's, every name unreserved in PostgreSQL.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gateway.store.console import ConsoleSession, ConsoleUser, Role, digest, normal_username
from gateway.store.postgres.rows import OnPool

if TYPE_CHECKING:
    from psycopg import AsyncConnection

DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS console_users (
        username text PRIMARY KEY,
        display_name text NOT NULL,
        role text NOT NULL,
        teacher text,
        password_hash text NOT NULL,
        created_at double precision NOT NULL,
        disabled boolean NOT NULL DEFAULT false
    )""",
    """CREATE TABLE IF NOT EXISTS console_sessions (
        id_digest text PRIMARY KEY,
        username text NOT NULL REFERENCES console_users (username) ON DELETE CASCADE,
        csrf text NOT NULL,
        created_at double precision NOT NULL,
        expires_at double precision NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS console_sessions_expiry ON console_sessions (expires_at)",
    """CREATE TABLE IF NOT EXISTS console_setup_tokens (
        digest text PRIMARY KEY,
        created_at double precision NOT NULL,
        expires_at double precision NOT NULL,
        used_at double precision
    )""",
    # At most one unused link: issuing a new one replaces it in place (ON CONFLICT on this index).
    "CREATE UNIQUE INDEX IF NOT EXISTS console_setup_one_live ON console_setup_tokens ((used_at IS NULL))"
    " WHERE used_at IS NULL",
)
"""The console's tables, for the PostgreSQL migrations."""

USER_COLUMNS = "u.username, u.display_name, u.role, u.teacher, u.password_hash, u.created_at, u.disabled"
"""A console user's columns in :func:`user_from_row`'s order (``u`` is ``console_users``); the tokens' join reads them too."""

_INSERT_USER = (
    "INSERT INTO console_users (username, display_name, role, teacher, password_hash, created_at, disabled)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (username) DO NOTHING RETURNING 1"
)


def user_from_row(row: tuple[Any, ...]) -> ConsoleUser:
    """A :class:`ConsoleUser` from :data:`USER_COLUMNS`."""
    username, display_name, role, teacher, password_hash, created_at, disabled = row
    return ConsoleUser(username, display_name, Role(role), teacher, password_hash, created_at, bool(disabled))


def _user_values(user: ConsoleUser) -> tuple[Any, ...]:
    return (user.username, user.display_name, user.role.value, user.teacher, user.password_hash, user.created_at,
            user.disabled)


class PgConsoleRows(OnPool):
    """The PostgreSQL side of :class:`~gateway.store.console.ConsoleStore`, mixed into the PostgreSQL store."""

    async def console_user_count(self) -> int:
        async def op(conn: AsyncConnection) -> int:
            row = await (await conn.execute("SELECT COUNT(*) FROM console_users")).fetchone()
            return int(row[0]) if row else 0

        return await self._tx(op)

    async def console_users(self) -> list[ConsoleUser]:
        async def op(conn: AsyncConnection) -> list[ConsoleUser]:
            cursor = await conn.execute(f"SELECT {USER_COLUMNS} FROM console_users u ORDER BY u.username")
            return [user_from_row(row) for row in await cursor.fetchall()]

        return await self._tx(op)

    async def console_user(self, username: str) -> ConsoleUser | None:
        async def op(conn: AsyncConnection) -> ConsoleUser | None:
            cursor = await conn.execute(f"SELECT {USER_COLUMNS} FROM console_users u WHERE u.username = %s",
                                        (normal_username(username),))
            row = await cursor.fetchone()
            return user_from_row(row) if row else None

        return await self._tx(op)

    async def add_console_user(self, user: ConsoleUser) -> bool:
        async def op(conn: AsyncConnection) -> bool:
            return await (await conn.execute(_INSERT_USER, _user_values(user))).fetchone() is not None

        return await self._tx(op)

    async def open_session(self, username: str, session_id: str, csrf: str, ttl_s: float) -> None:
        now = time.time()

        async def op(conn: AsyncConnection) -> None:
            await conn.execute(
                "INSERT INTO console_sessions (id_digest, username, csrf, created_at, expires_at) VALUES (%s, %s, %s, %s, %s)",
                (digest(session_id), normal_username(username), csrf, now, now + ttl_s))

        await self._tx(op)

    async def session(self, session_id: str) -> ConsoleSession | None:
        now = time.time()

        async def op(conn: AsyncConnection) -> ConsoleSession | None:
            cursor = await conn.execute(
                f"SELECT {USER_COLUMNS}, s.csrf, s.created_at, s.expires_at FROM console_sessions s"
                " JOIN console_users u ON u.username = s.username"
                " WHERE s.id_digest = %s AND s.expires_at > %s AND NOT u.disabled",
                (digest(session_id), now))
            row = await cursor.fetchone()
            return ConsoleSession(user_from_row(row[:7]), row[7], row[8], row[9]) if row else None

        return await self._tx(op)

    async def end_session(self, session_id: str) -> None:
        async def op(conn: AsyncConnection) -> None:
            await conn.execute("DELETE FROM console_sessions WHERE id_digest = %s", (digest(session_id),))

        await self._tx(op)

    async def issue_setup_token(self, token: str, ttl_s: float) -> None:
        now = time.time()

        async def op(conn: AsyncConnection) -> None:
            await conn.execute(
                "INSERT INTO console_setup_tokens (digest, created_at, expires_at) VALUES (%s, %s, %s)"
                " ON CONFLICT ((used_at IS NULL)) WHERE used_at IS NULL DO UPDATE SET digest = excluded.digest,"
                " created_at = excluded.created_at, expires_at = excluded.expires_at",
                (digest(token), now, now + ttl_s))

        await self._tx(op)

    async def setup_token_live(self, token: str) -> bool:
        now = time.time()

        async def op(conn: AsyncConnection) -> bool:
            cursor = await conn.execute(
                "SELECT 1 FROM console_setup_tokens WHERE digest = %s AND used_at IS NULL AND expires_at > %s"
                " AND NOT EXISTS (SELECT 1 FROM console_users)", (digest(token), now))
            return await cursor.fetchone() is not None

        return await self._tx(op)

    async def redeem_setup_token(self, token: str, user: ConsoleUser) -> bool:
        now = time.time()

        async def op(conn: AsyncConnection) -> bool:
            # The UPDATE locks the link's row: a second node redeeming it waits, then finds it used.
            cursor = await conn.execute(
                "WITH taken AS (UPDATE console_setup_tokens SET used_at = %s WHERE digest = %s AND used_at IS NULL"
                " AND expires_at > %s AND NOT EXISTS (SELECT 1 FROM console_users) RETURNING 1)"
                " INSERT INTO console_users (username, display_name, role, teacher, password_hash, created_at,"
                " disabled) SELECT %s, %s, %s, %s, %s, %s, %s FROM taken ON CONFLICT (username) DO NOTHING RETURNING 1",
                (now, digest(token), now, *_user_values(user)))
            return await cursor.fetchone() is not None

        return await self._tx(op)

    async def _prune_console(self, conn: AsyncConnection, now: float) -> int:
        """Expired sessions and setup links (for the store's ``prune``, inside its transaction)."""
        sessions = await conn.execute("DELETE FROM console_sessions WHERE expires_at <= %s", (now,))
        links = await conn.execute("DELETE FROM console_setup_tokens WHERE expires_at <= %s", (now,))
        return max(sessions.rowcount, 0) + max(links.rowcount, 0)
