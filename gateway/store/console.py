"""The teacher console's rows: its users, their sessions, and the one-time setup link (ADR 0036).

They live in ``gateway.db`` beside the pairing codes they resemble, written through the same
writer thread, so a sign-in is as durable as an approved learner and a second store is never
opened.  This module holds the rows and the SQL; what a row *means* -- who may see what, how a
password is checked, how long a session lasts -- is the console's (:mod:`gateway.console`).

Secrets are never stored as given: a password only as its argon2 hash (made by the console),
a session id and a setup token only as their SHA-256 digest (:func:`digest`), so a copy of the
file opens no session and redeems no link.  Both are 32 random bytes: a digest without a salt
or a slow hash is enough for values nobody can guess.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from gateway.store.rows import OnWriter


class Role(str, Enum):
    """What a console user is: an administrator sees every partner, a teacher the partners they own."""

    ADMINISTRATOR = "administrator"
    TEACHER = "teacher"


@dataclass(frozen=True)
class ConsoleUser:
    username: str
    """Lower-case, as typed at sign-in after :func:`normal_username`."""
    display_name: str
    role: Role
    teacher: str | None
    """A teacher's identity as the config names partner owners, ``CHANNEL:USER``; None for an administrator."""
    password_hash: str
    created_at: float
    disabled: bool = False


@dataclass(frozen=True)
class ConsoleSession:
    user: ConsoleUser
    csrf: str
    """The token every unsafe request of this session carries (a form field or a header)."""
    created_at: float
    expires_at: float


def digest(value: str) -> str:
    """What is stored of a session id or a setup token: its SHA-256, in hex."""
    return hashlib.sha256(value.encode()).hexdigest()


def normal_username(username: str) -> str:
    """One spelling per name: ``Ada`` and ``ada`` are the same user."""
    return username.strip().casefold()


class ConsoleStore(Protocol):
    """The console's part of :class:`gateway.store.Store`."""

    async def console_user_count(self) -> int: ...
    async def console_users(self) -> list[ConsoleUser]: ...
    async def console_user(self, username: str) -> ConsoleUser | None: ...
    async def add_console_user(self, user: ConsoleUser) -> bool:
        """Create ``user``; False (and nothing written) when the username is taken."""
        ...

    async def open_session(self, username: str, session_id: str, csrf: str, ttl_s: float) -> None: ...
    async def session(self, session_id: str) -> ConsoleSession | None:
        """The live session with this id, its user enabled; None for an unknown, expired or disabled one."""
        ...

    async def end_session(self, session_id: str) -> None: ...
    async def issue_setup_token(self, token: str, ttl_s: float) -> None:
        """Keep ``token`` as the one live setup link, voiding any earlier one not yet used."""
        ...

    async def setup_token_live(self, token: str) -> bool: ...
    async def redeem_setup_token(self, token: str, user: ConsoleUser) -> bool:
        """In one transaction: the token is live and no console user exists yet -> mark it used and create ``user``."""
        ...


def _user(row: tuple[Any, ...]) -> ConsoleUser:
    username, display_name, role, teacher, password_hash, created_at, disabled = row
    return ConsoleUser(username, display_name, Role(role), teacher, password_hash, created_at, bool(disabled))


_USER_COLUMNS = "u.username, u.display_name, u.role, u.teacher, u.password_hash, u.created_at, u.disabled"


def _insert_user(conn: sqlite3.Connection, user: ConsoleUser) -> bool:
    cursor = conn.execute(
        "INSERT INTO console_users (username, display_name, role, teacher, password_hash, created_at, disabled)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (username) DO NOTHING",
        (user.username, user.display_name, user.role.value, user.teacher, user.password_hash, user.created_at,
         int(user.disabled)),
    )
    return cursor.rowcount == 1


class ConsoleRows(OnWriter):
    """The SQLite side of :class:`ConsoleStore`, mixed into :class:`gateway.store.sqlite.SqliteStore`.

    Every operation runs on the store's writer thread (``_run``), as every other row does."""

    async def console_user_count(self) -> int:
        return await self._run(lambda conn: int(conn.execute("SELECT COUNT(*) FROM console_users").fetchone()[0]))

    async def console_users(self) -> list[ConsoleUser]:
        def op(conn: sqlite3.Connection) -> list[ConsoleUser]:
            return [_user(row) for row in conn.execute(f"SELECT {_USER_COLUMNS} FROM console_users u ORDER BY u.username")]

        return await self._run(op)

    async def console_user(self, username: str) -> ConsoleUser | None:
        def op(conn: sqlite3.Connection) -> ConsoleUser | None:
            row = conn.execute(f"SELECT {_USER_COLUMNS} FROM console_users u WHERE u.username = ?",
                               (normal_username(username),)).fetchone()
            return _user(row) if row else None

        return await self._run(op)

    async def add_console_user(self, user: ConsoleUser) -> bool:
        return await self._run(lambda conn: _insert_user(conn, user))

    async def open_session(self, username: str, session_id: str, csrf: str, ttl_s: float) -> None:
        now = time.time()
        await self._run(lambda conn: conn.execute(
            "INSERT INTO console_sessions (id_digest, username, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
            (digest(session_id), normal_username(username), csrf, now, now + ttl_s)))

    async def session(self, session_id: str) -> ConsoleSession | None:
        now = time.time()

        def op(conn: sqlite3.Connection) -> ConsoleSession | None:
            row = conn.execute(
                f"SELECT {_USER_COLUMNS}, s.csrf, s.created_at, s.expires_at FROM console_sessions s"
                " JOIN console_users u ON u.username = s.username"
                " WHERE s.id_digest = ? AND s.expires_at > ? AND u.disabled = 0",
                (digest(session_id), now)).fetchone()
            return ConsoleSession(_user(row[:7]), row[7], row[8], row[9]) if row else None

        return await self._run(op)

    async def end_session(self, session_id: str) -> None:
        await self._run(lambda conn: conn.execute("DELETE FROM console_sessions WHERE id_digest = ?", (digest(session_id),)))

    async def issue_setup_token(self, token: str, ttl_s: float) -> None:
        now = time.time()

        def op(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM console_setup_tokens WHERE used_at IS NULL")
            conn.execute("INSERT INTO console_setup_tokens (digest, created_at, expires_at) VALUES (?, ?, ?)",
                         (digest(token), now, now + ttl_s))

        await self._run(op)

    async def setup_token_live(self, token: str) -> bool:
        now = time.time()

        def op(conn: sqlite3.Connection) -> bool:
            row = conn.execute("SELECT 1 FROM console_setup_tokens WHERE digest = ? AND used_at IS NULL AND expires_at > ?"
                               " AND NOT EXISTS (SELECT 1 FROM console_users)", (digest(token), now)).fetchone()
            return row is not None

        return await self._run(op)

    async def redeem_setup_token(self, token: str, user: ConsoleUser) -> bool:
        now = time.time()

        def op(conn: sqlite3.Connection) -> bool:
            taken = conn.execute(
                "UPDATE console_setup_tokens SET used_at = ? WHERE digest = ? AND used_at IS NULL AND expires_at > ?"
                " AND NOT EXISTS (SELECT 1 FROM console_users)", (now, digest(token), now)).rowcount
            return taken == 1 and _insert_user(conn, user)

        return await self._run(op)

    def _prune_console(self, conn: sqlite3.Connection, now: float) -> int:
        """Expired sessions and setup links (called inside :meth:`SqliteStore.prune`)."""
        removed = conn.execute("DELETE FROM console_sessions WHERE expires_at <= ?", (now,)).rowcount
        return removed + conn.execute("DELETE FROM console_setup_tokens WHERE expires_at <= ?", (now,)).rowcount
