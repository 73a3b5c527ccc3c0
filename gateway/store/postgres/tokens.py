"""The console's API tokens on PostgreSQL: :class:`~gateway.store.tokens.ApiTokenStore` for a fleet.

The rows are :class:`~gateway.store.tokens.ApiToken` as on SQLite, kept by their secret's digest.  The
cap of :data:`~gateway.store.tokens.MAX_TOKENS_PER_USER` must hold with N nodes adding at once, which
a count then an insert does not: each user's number of tokens is a row of ``console_token_counts``,
raised by an upsert that refuses past the cap (``ON CONFLICT ... DO UPDATE ... WHERE held < cap``, which
locks the row and rechecks it), and the token is inserted in the same statement only when it was
raised.  Revoking and pruning lower it in the statement that deletes.  A token's use is noted at most
once a :data:`~gateway.store.tokens.TOUCH_EVERY_S`, in the statement that finds it.
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
    """CREATE TABLE IF NOT EXISTS console_token_counts (
        username text PRIMARY KEY REFERENCES console_users (username) ON DELETE CASCADE,
        held integer NOT NULL CHECK (held >= 0)
    )""",
)
"""The API tokens' tables, for the PostgreSQL migrations (after the console's)."""

_COLUMNS = "t.id, t.username, t.name, t.created_at, t.last_used_at, t.expires_at"

_LOWER_COUNTS = (
    " UPDATE console_token_counts c SET held = c.held - g.n"
    " FROM (SELECT username, COUNT(*) AS n FROM gone GROUP BY username) g WHERE c.username = g.username"
)
"""Lowers each user's count by the tokens the ``gone`` CTE (``DELETE ... RETURNING username``) deleted."""


def _token(row: tuple[Any, ...]) -> ApiToken:
    return ApiToken(*row)


class PgApiTokenRows(OnPool):
    """The PostgreSQL side of :class:`~gateway.store.tokens.ApiTokenStore`."""

    async def add_api_token(self, token: ApiToken, secret: str) -> bool:
        async def op(conn: AsyncConnection) -> bool:
            cursor = await conn.execute(
                "WITH raised AS (INSERT INTO console_token_counts (username, held)"
                " SELECT username, 1 FROM console_users WHERE username = %s"
                " ON CONFLICT (username) DO UPDATE SET held = console_token_counts.held + 1"
                " WHERE console_token_counts.held < %s RETURNING username)"
                " INSERT INTO console_tokens (id, digest, username, name, created_at, last_used_at, expires_at)"
                " SELECT %s, %s, username, %s, %s, NULL, %s FROM raised RETURNING 1",
                (normal_username(token.username), MAX_TOKENS_PER_USER, token.id, digest(secret), token.name,
                 token.created_at, token.expires_at))
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
            cursor = await conn.execute(
                f"WITH gone AS (DELETE FROM console_tokens WHERE {where} RETURNING username),"
                f" lowered AS ({_LOWER_COUNTS} RETURNING 1) SELECT COUNT(*) FROM gone", args)
            row = await cursor.fetchone()
            return bool(row and row[0] == 1)

        return await self._tx(op)

    async def _prune_tokens(self, conn: AsyncConnection, now: float) -> int:
        """Expired tokens (for the store's ``prune``, with the console's): they open nothing, and listing them helps no one."""
        cursor = await conn.execute(
            "WITH gone AS (DELETE FROM console_tokens WHERE expires_at IS NOT NULL AND expires_at <= %s RETURNING username),"
            f" lowered AS ({_LOWER_COUNTS} RETURNING 1) SELECT COUNT(*) FROM gone", (now,))
        row = await cursor.fetchone()
        return int(row[0]) if row else 0
