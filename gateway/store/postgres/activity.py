"""The channel switches and hourly activity sums on PostgreSQL: :class:`~gateway.store.activity.ActivityStore` for a fleet.

Each node adds what it counted to the same hour's rows, so adding is one upsert that sums in the
database (``value = activity_hourly.value + excluded.value``), never a read then a write.  The rows of
one call are summed by key first (one statement may not touch a row twice) and sent in key order, so
two nodes adding overlapping hours lock those rows in the same order and never deadlock.  The columns
are SQLite's (``hour`` and ``value`` are unreserved in PostgreSQL).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gateway.store.activity import ActivityRow, Switch
from gateway.store.postgres.rows import OnPool

if TYPE_CHECKING:
    from psycopg import AsyncConnection

DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS channel_switches (
        channel text NOT NULL,
        account text NOT NULL,
        disabled_by text NOT NULL,
        disabled_at double precision NOT NULL,
        PRIMARY KEY (channel, account)
    )""",
    """CREATE TABLE IF NOT EXISTS activity_hourly (
        hour bigint NOT NULL,
        partner text NOT NULL,
        channel text NOT NULL,
        account text NOT NULL,
        measure text NOT NULL,
        label text NOT NULL,
        value double precision NOT NULL,
        PRIMARY KEY (hour, partner, channel, account, measure, label)
    )""",
)
"""The switches' and activity sums' tables, for the PostgreSQL migrations."""

_Key = tuple[int, str, str, str, str, str]


def _summed(rows: Sequence[ActivityRow]) -> list[tuple[_Key, float]]:
    sums: dict[_Key, float] = {}
    for r in rows:
        key = (r.hour, r.partner, r.channel, r.account, r.measure, r.label)
        sums[key] = sums.get(key, 0.0) + r.value
    return sorted(sums.items())


class PgActivityRows(OnPool):
    """The PostgreSQL side of :class:`~gateway.store.activity.ActivityStore`."""

    async def disabled_accounts(self) -> list[Switch]:
        async def op(conn: AsyncConnection) -> list[Switch]:
            cursor = await conn.execute("SELECT channel, account, disabled_by, disabled_at FROM channel_switches"
                                        " ORDER BY channel, account")
            return [Switch(*row) for row in await cursor.fetchall()]

        return await self._tx(op)

    async def set_account_disabled(self, channel: str, account: str, by: str | None) -> None:
        now = time.time()

        async def op(conn: AsyncConnection) -> None:
            if by is None:
                await conn.execute("DELETE FROM channel_switches WHERE channel = %s AND account = %s", (channel, account))
            else:
                await conn.execute(
                    "INSERT INTO channel_switches (channel, account, disabled_by, disabled_at) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (channel, account) DO UPDATE SET disabled_by = excluded.disabled_by,"
                    " disabled_at = excluded.disabled_at", (channel, account, by, now))

        await self._tx(op)

    async def add_activity(self, rows: Sequence[ActivityRow]) -> None:
        summed = _summed(rows)
        columns = list(zip(*(key for key, _ in summed), strict=True)) if summed else []

        async def op(conn: AsyncConnection) -> None:
            await conn.execute(
                "INSERT INTO activity_hourly (hour, partner, channel, account, measure, label, value)"
                " SELECT h, p, c, a, m, l, v FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[],"
                " %s::text[], %s::double precision[]) WITH ORDINALITY AS r (h, p, c, a, m, l, v, n) ORDER BY n"
                " ON CONFLICT (hour, partner, channel, account, measure, label)"
                " DO UPDATE SET value = activity_hourly.value + excluded.value",
                (*(list(column) for column in columns), [value for _, value in summed]))

        if summed:
            await self._tx(op)

    async def activity_since(self, since: float) -> list[ActivityRow]:
        async def op(conn: AsyncConnection) -> list[ActivityRow]:
            cursor = await conn.execute(
                "SELECT hour, partner, channel, account, measure, label, value FROM activity_hourly"
                " WHERE hour >= %s ORDER BY hour", (int(since) - int(since) % 3600,))
            return [ActivityRow(*row) for row in await cursor.fetchall()]

        return await self._tx(op)

    async def _prune_activity(self, conn: AsyncConnection, now: float) -> int:
        """Hours older than the dashboard's longest view, a week, with a day to spare (for the store's ``prune``)."""
        cursor = await conn.execute("DELETE FROM activity_hourly WHERE hour < %s", (now - 8 * 24 * 3600,))
        return max(cursor.rowcount, 0)
