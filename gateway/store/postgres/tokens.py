"""The console's API tokens on PostgreSQL: :class:`~gateway.store.tokens.ApiTokenStore` for a fleet.

The rows are :class:`~gateway.store.tokens.ApiToken` as on SQLite, kept by their secret's digest, in
SQLite's table and columns.  The cap of :data:`~gateway.store.tokens.MAX_TOKENS_PER_USER` must hold
with N nodes adding at once, which a count then an insert does not on its own: adding first locks the
user's row (``FOR NO KEY UPDATE``, which foreign-key checks do not wait for), so one user's adds run
one after another across all nodes, and the counting insert that follows is a new statement whose
snapshot sees every add committed before it (READ COMMITTED).  One statement cannot do both: its
snapshot is taken before it waits for the lock.  Revoking and pruning only delete, which can only
make room.  A token's use is noted at most once a :data:`~gateway.store.tokens.TOUCH_EVERY_S`, in the
statement that finds it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from gateway.store.console import ConsoleUser, digest, normal_username
from gateway.store.postgres.console import USER_COLUMNS, user_from_row
from gateway.store.postgres.rows import OnPool
from gateway.store.tokens import MAX_TOKENS_PER_USER, TOUCH_EVERY_S, ApiToken

if TYPE_CHECKING:
    from psycopg import AsyncConnection

DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS console_tokens (
        id text PRIMARY KEY,
        digest text NOT NULL UNIQUE,
        username text NOT NULL REFERENCES console_users (username) ON DELETE CASCADE,
        name text NOT NULL,
        created_at double precision NOT NULL,
        last_used_at double precision,
        expires_at double precision
    )""",
    "CREATE INDEX IF NOT EXISTS console_tokens_user ON console_tokens (username, created_at)",
)
"""The API tokens' table, for the PostgreSQL migrations (after the console's)."""

_COLUMNS = "t.id, t.username, t.name, t.created_at, t.last_used_at, t.expires_at"


def _token(row: tuple[Any, ...]) -> ApiToken:
    return ApiToken(*row)


class PgApiTokenRows(OnPool):
    """The PostgreSQL side of :class:`~gateway.store.tokens.ApiTokenStore`."""

    async def add_api_token(self, token: ApiToken, secret: str) -> bool:
        username = normal_username(token.username)

        async def op(conn: AsyncConnection) -> bool:
            owner = await conn.execute("SELECT 1 FROM console_users WHERE username = %s FOR NO KEY UPDATE", (username,))
            if await owner.fetchone() is None:
                return False
            cursor = await conn.execute(
                "INSERT INTO console_tokens (id, digest, username, name, created_at, last_used_at, expires_at)"
                " SELECT %s, %s, %s, %s, %s, NULL, %s"
                " WHERE (SELECT COUNT(*) FROM console_tokens WHERE username = %s) < %s RETURNING 1",
                (token.id, digest(secret), username, token.name, token.created_at, token.expires_at, username,
                 MAX_TOKENS_PER_USER))
            return await cursor.fetchone() is not None

        return await self._tx(op)

    async def api_tokens(self, username: str | None = None) -> list[ApiToken]:
        now = time.time()

        async def op(conn: AsyncConnection) -> list[ApiToken]:
            where, args = "(t.expires_at IS NULL OR t.expires_at > %s)", list[object]([now])
            if username is not None:
                where += " AND t.username = %s"
                args.append(normal_username(username))
            cursor = await conn.execute(
                f"SELECT {_COLUMNS} FROM console_tokens t WHERE {where} ORDER BY t.created_at DESC, t.id", args)
            return [_token(row) for row in await cursor.fetchall()]

        return await self._tx(op)

    async def api_token_user(self, secret: str) -> tuple[ConsoleUser, ApiToken] | None:
        now = time.time()

        async def op(conn: AsyncConnection) -> tuple[ConsoleUser, ApiToken] | None:
            # The found row as it was (its last use before this one), and the touch, in one statement.
            cursor = await conn.execute(
                f"WITH hit AS (SELECT {USER_COLUMNS}, {_COLUMNS} FROM console_tokens t"
                " JOIN console_users u ON u.username = t.username"
                " WHERE t.digest = %(digest)s AND (t.expires_at IS NULL OR t.expires_at > %(now)s) AND NOT u.disabled),"
                " touched AS (UPDATE console_tokens SET last_used_at = %(now)s WHERE id IN (SELECT id FROM hit)"
                " AND (last_used_at IS NULL OR last_used_at < %(stale)s) RETURNING 1)"
                " SELECT * FROM hit",
                {"digest": digest(secret), "now": now, "stale": now - TOUCH_EVERY_S})
            row = await cursor.fetchone()
            return (user_from_row(row[:7]), _token(row[7:])) if row else None

        return await self._tx(op)

    async def revoke_api_token(self, token_id: str, username: str | None = None) -> bool:
        async def op(conn: AsyncConnection) -> bool:
            where, args = "id = %s", [token_id]
            if username is not None:
                where += " AND username = %s"
                args.append(normal_username(username))
            cursor = await conn.execute(f"DELETE FROM console_tokens WHERE {where} RETURNING 1", args)
            return len(await cursor.fetchall()) == 1

        return await self._tx(op)

    async def _prune_tokens(self, conn: AsyncConnection, now: float) -> int:
        """Expired tokens (for the store's ``prune``, with the console's): they open nothing, and listing them helps no one."""
        cursor = await conn.execute(
            "DELETE FROM console_tokens WHERE expires_at IS NOT NULL AND expires_at <= %s", (now,))
        return max(cursor.rowcount, 0)
