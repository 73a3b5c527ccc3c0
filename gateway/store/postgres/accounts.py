"""The console-made channel accounts on PostgreSQL: :class:`~gateway.store.accounts.AccountStore` for a fleet.

The rows are :class:`~gateway.store.accounts.StoredAccount` as on SQLite; the sealed settings are
``bytea`` (this module never sees them in the clear).  Adding one is ``INSERT ... ON CONFLICT DO
NOTHING``, so two nodes adding the same name make one row and one of them hears False.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.store.accounts import StoredAccount
from gateway.store.postgres.rows import OnPool

if TYPE_CHECKING:
    from psycopg import AsyncConnection

DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS channel_accounts (
        channel text NOT NULL,
        account text NOT NULL,
        partner text NOT NULL,
        settings bytea NOT NULL,
        created_by text NOT NULL,
        created_at double precision NOT NULL,
        PRIMARY KEY (channel, account)
    )""",
)
"""The console-made accounts' table, for the PostgreSQL migrations."""

_COLUMNS = "channel, account, partner, settings, created_by, created_at"


class PgAccountRows(OnPool):
    """The PostgreSQL side of :class:`~gateway.store.accounts.AccountStore`."""

    async def stored_accounts(self) -> list[StoredAccount]:
        async def op(conn: AsyncConnection) -> list[StoredAccount]:
            cursor = await conn.execute(f"SELECT {_COLUMNS} FROM channel_accounts ORDER BY channel, account")
            return [StoredAccount(c, a, p, bytes(s), by, at) for c, a, p, s, by, at in await cursor.fetchall()]

        return await self._tx(op)

    async def add_stored_account(self, account: StoredAccount) -> bool:
        async def op(conn: AsyncConnection) -> bool:
            cursor = await conn.execute(
                f"INSERT INTO channel_accounts ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (channel, account) DO NOTHING RETURNING 1",
                (account.channel, account.account, account.partner, account.sealed, account.created_by,
                 account.created_at))
            return await cursor.fetchone() is not None

        return await self._tx(op)

    async def reseal_stored_account(self, channel: str, account: str, sealed: bytes) -> None:
        async def op(conn: AsyncConnection) -> None:
            await conn.execute("UPDATE channel_accounts SET settings = %s WHERE channel = %s AND account = %s",
                               (sealed, channel, account))

        await self._tx(op)

    async def remove_stored_account(self, channel: str, account: str) -> bool:
        async def op(conn: AsyncConnection) -> bool:
            cursor = await conn.execute("DELETE FROM channel_accounts WHERE channel = %s AND account = %s RETURNING 1",
                                        (channel, account))
            return await cursor.fetchone() is not None

        return await self._tx(op)
