"""The channel accounts added in the console: one row each, their settings sealed (ADR 0040).

The config file's accounts are the operator's; these are the console's, kept in ``gateway.db`` beside
the switches that turn accounts off.  A row names the account, the partner that answers it (the
console binds the whole account to that partner), who added it and when, and its settings as one
opaque value sealed by :mod:`gateway.secretbox` -- this module never sees a token in the clear and
cannot open one.  What a row *means* (validated by the channel's own model, merged with the file's
accounts, started and stopped) is the gateway's (:mod:`gateway.accounts`, ``gateway.app``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Protocol

from gateway.store.rows import OnWriter


@dataclass(frozen=True)
class StoredAccount:
    """A console-made channel account as stored."""

    channel: str
    account: str
    partner: str
    """The partner bound to the whole account."""
    sealed: bytes
    """The account's settings (JSON), sealed with ``PARTNERS_SECRET_KEY``."""
    created_by: str
    """The console user who added it."""
    created_at: float


class AccountStore(Protocol):
    """The console-made accounts part of :class:`gateway.store.Store`."""

    async def stored_accounts(self) -> list[StoredAccount]: ...
    async def add_stored_account(self, account: StoredAccount) -> bool:
        """Insert it; False (and nothing written) when the console already holds an account of that name."""
        ...

    async def reseal_stored_account(self, channel: str, account: str, sealed: bytes) -> None:
        """Replace the sealed settings (a key rotation, or a replaced secret)."""
        ...

    async def remove_stored_account(self, channel: str, account: str) -> bool:
        """Delete it; False when there was none."""
        ...


_COLUMNS = "channel, account, partner, settings, created_by, created_at"


def read_stored_accounts(conn: sqlite3.Connection) -> list[StoredAccount]:
    """Every console-made account on ``conn``: the store's read, and ``partners doctor``'s on a read-only connection."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM channel_accounts ORDER BY channel, account")
    return [StoredAccount(c, a, p, bytes(s), by, at) for c, a, p, s, by, at in rows]


class AccountRows(OnWriter):
    """The SQLite side of :class:`AccountStore`, mixed into :class:`gateway.store.sqlite.SqliteStore`."""

    async def stored_accounts(self) -> list[StoredAccount]:
        return await self._run(read_stored_accounts)

    async def add_stored_account(self, account: StoredAccount) -> bool:
        def op(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                f"INSERT INTO channel_accounts ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (channel, account) DO NOTHING",
                (account.channel, account.account, account.partner, account.sealed, account.created_by,
                 account.created_at))
            return cursor.rowcount == 1

        return await self._run(op)

    async def reseal_stored_account(self, channel: str, account: str, sealed: bytes) -> None:
        await self._run(lambda conn: conn.execute(
            "UPDATE channel_accounts SET settings = ? WHERE channel = ? AND account = ?", (sealed, channel, account)))

    async def remove_stored_account(self, channel: str, account: str) -> bool:
        return await self._run(lambda conn: conn.execute(
            "DELETE FROM channel_accounts WHERE channel = ? AND account = ?", (channel, account)).rowcount == 1)
