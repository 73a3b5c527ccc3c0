"""The console's API tokens: rows a console user makes for their scripts, each acting as that user (ADR 0041).

A token is shown once, when it is made, and kept only as its SHA-256 digest (:func:`~gateway.store.console.digest`),
like a session id: it is 32 random bytes, so nobody can guess one and a slow, salted hash would add nothing
but a delay on every request.  A row has a short public ``id`` (what lists show and revocation names), the
user it acts as, a name its owner chose, when it was made and last used, and an optional expiry.  Revoking
deletes the row, so a revoked token and one that never existed are the same to the API: 401.  A user's
row goes with its user (``ON DELETE CASCADE``), and a disabled user's tokens open nothing while disabled.

``last_used_at`` is written at most once a :data:`TOUCH_EVERY_S` per token: a script polling every second
would otherwise cost a store write per request.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gateway.store.console import digest, normal_username
from gateway.store.rows import OnWriter

if TYPE_CHECKING:  # pragma: no cover - typing only
    from gateway.store.console import ConsoleUser

TOUCH_EVERY_S = 60.0
MAX_TOKENS_PER_USER = 50
"""A teacher has a handful of scripts; a runaway loop making tokens stops here instead of filling the file."""


@dataclass(frozen=True)
class ApiToken:
    """One token as it is listed: never its secret, which only its maker saw once."""

    id: str
    username: str
    name: str
    created_at: float
    last_used_at: float | None
    expires_at: float | None


class ApiTokenStore(Protocol):
    """The API tokens' part of :class:`gateway.store.Store`."""

    async def add_api_token(self, token: ApiToken, secret: str) -> bool:
        """Keep ``token``, found by ``secret``'s digest; False (nothing written) when its user has
        :data:`MAX_TOKENS_PER_USER` already or does not exist."""
        ...

    async def api_tokens(self, username: str | None = None) -> list[ApiToken]:
        """Every live token, or one user's, newest first."""
        ...

    async def api_token_user(self, secret: str) -> tuple[ConsoleUser, ApiToken] | None:
        """The enabled user a live (unexpired, unrevoked) token acts as, noting that it was used; None otherwise."""
        ...

    async def revoke_api_token(self, token_id: str, username: str | None = None) -> bool:
        """Delete the token (only if it is ``username``'s, when given); False when there was none to delete."""
        ...


_COLUMNS = "t.id, t.username, t.name, t.created_at, t.last_used_at, t.expires_at"


def _token(row: tuple[Any, ...]) -> ApiToken:
    return ApiToken(*row)


class ApiTokenRows(OnWriter):
    """The SQLite side of :class:`ApiTokenStore`, mixed into the store with the console's rows."""

    async def add_api_token(self, token: ApiToken, secret: str) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            username = normal_username(token.username)
            if conn.execute("SELECT 1 FROM console_users WHERE username = ?", (username,)).fetchone() is None:
                return False
            held = conn.execute("SELECT COUNT(*) FROM console_tokens WHERE username = ?", (username,)).fetchone()[0]
            if held >= MAX_TOKENS_PER_USER:
                return False
            conn.execute("INSERT INTO console_tokens (id, digest, username, name, created_at, last_used_at, expires_at)"
                         " VALUES (?, ?, ?, ?, ?, NULL, ?)",
                         (token.id, digest(secret), username, token.name, token.created_at, token.expires_at))
            return True

        return await self._run(op)

    async def api_tokens(self, username: str | None = None) -> list[ApiToken]:
        now = time.time()

        def op(conn: sqlite3.Connection) -> list[ApiToken]:
            where, args = "(t.expires_at IS NULL OR t.expires_at > ?)", list[object]([now])
            if username is not None:
                where += " AND t.username = ?"
                args.append(normal_username(username))
            return [_token(row) for row in conn.execute(
                f"SELECT {_COLUMNS} FROM console_tokens t WHERE {where} ORDER BY t.created_at DESC, t.id", args)]

        return await self._run(op)

    async def api_token_user(self, secret: str) -> tuple[ConsoleUser, ApiToken] | None:
        from gateway.store.console import _USER_COLUMNS, _user

        now = time.time()

        def op(conn: sqlite3.Connection) -> tuple[ConsoleUser, ApiToken] | None:
            row = conn.execute(
                f"SELECT {_USER_COLUMNS}, {_COLUMNS} FROM console_tokens t JOIN console_users u ON u.username = t.username"
                " WHERE t.digest = ? AND (t.expires_at IS NULL OR t.expires_at > ?) AND u.disabled = 0",
                (digest(secret), now)).fetchone()
            if row is None:
                return None
            user, token = _user(row[:7]), _token(row[7:])
            if token.last_used_at is None or token.last_used_at < now - TOUCH_EVERY_S:
                conn.execute("UPDATE console_tokens SET last_used_at = ? WHERE id = ?", (now, token.id))
            return user, token

        return await self._run(op)

    async def revoke_api_token(self, token_id: str, username: str | None = None) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            if username is None:
                return conn.execute("DELETE FROM console_tokens WHERE id = ?", (token_id,)).rowcount == 1
            return conn.execute("DELETE FROM console_tokens WHERE id = ? AND username = ?",
                                (token_id, normal_username(username))).rowcount == 1

        return await self._run(op)

    def _prune_tokens(self, conn: sqlite3.Connection, now: float) -> int:
        """Expired tokens (called with the console's pruning): they open nothing, and listing them helps no one."""
        return conn.execute("DELETE FROM console_tokens WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,)).rowcount
