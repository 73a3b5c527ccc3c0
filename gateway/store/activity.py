"""Rows that outlive a restart for the console's channels and dashboard pages.

``channel_switches`` keeps which channel accounts an operator disabled (and who, and when), so a
disabled account stays stopped when the gateway starts again (ADR 0036, its addendum).  ``activity_hourly``
keeps per-hour sums of what the gateway counts -- messages in and out, drops and errors by
reason, answer latencies by histogram bucket -- per channel account, so the dashboard's day and
week charts survive a restart although the Prometheus counters (:mod:`gateway.metrics`) start
again from zero.  :mod:`gateway.activity` writes them; this module holds only the rows and the SQL.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from gateway.store.rows import OnWriter


@dataclass(frozen=True)
class Switch:
    """A channel account an operator disabled."""

    channel: str
    account: str
    by: str
    """The console user who disabled it."""
    at: float


@dataclass(frozen=True)
class ActivityRow:
    """One hour's sum of one measure for one channel account."""

    hour: int
    """Unix seconds of the hour's start (UTC)."""
    partner: str
    """The partner bound to the whole account when it was counted (a model error's own partner); '' for none."""
    channel: str
    account: str
    measure: str
    """``in``, ``out``, ``drop``, ``error``, ``latency`` (a histogram bucket), ``model_error``..."""
    label: str
    """The reason of a drop, the kind of an error, the upper bound of a latency bucket; '' for none."""
    value: float


class ActivityStore(Protocol):
    """The switches and activity part of :class:`gateway.store.Store`."""

    async def disabled_accounts(self) -> list[Switch]: ...
    async def set_account_disabled(self, channel: str, account: str, by: str | None) -> None:
        """Record the account disabled by ``by``; ``None`` enables it again (removes the row)."""
        ...

    async def add_activity(self, rows: Sequence[ActivityRow]) -> None:
        """Add each row's value to its hour's sum, in one transaction."""
        ...

    async def activity_since(self, since: float) -> list[ActivityRow]: ...


class ActivityRows(OnWriter):
    """The SQLite side of :class:`ActivityStore`, mixed into :class:`gateway.store.sqlite.SqliteStore`."""

    async def disabled_accounts(self) -> list[Switch]:
        def op(conn: sqlite3.Connection) -> list[Switch]:
            rows = conn.execute("SELECT channel, account, disabled_by, disabled_at FROM channel_switches"
                                " ORDER BY channel, account")
            return [Switch(*row) for row in rows]

        return await self._run(op)

    async def set_account_disabled(self, channel: str, account: str, by: str | None) -> None:
        def op(conn: sqlite3.Connection) -> None:
            if by is None:
                conn.execute("DELETE FROM channel_switches WHERE channel = ? AND account = ?", (channel, account))
            else:
                conn.execute("INSERT INTO channel_switches (channel, account, disabled_by, disabled_at) VALUES (?, ?, ?, ?)"
                             " ON CONFLICT (channel, account) DO UPDATE SET disabled_by = excluded.disabled_by,"
                             " disabled_at = excluded.disabled_at", (channel, account, by, time.time()))

        await self._run(op)

    async def add_activity(self, rows: Sequence[ActivityRow]) -> None:
        def op(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO activity_hourly (hour, partner, channel, account, measure, label, value)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hour, partner, channel, account, measure, label)"
                " DO UPDATE SET value = value + excluded.value",
                [(r.hour, r.partner, r.channel, r.account, r.measure, r.label, r.value) for r in rows])

        if rows:
            await self._run(op)

    async def activity_since(self, since: float) -> list[ActivityRow]:
        def op(conn: sqlite3.Connection) -> list[ActivityRow]:
            rows = conn.execute("SELECT hour, partner, channel, account, measure, label, value FROM activity_hourly"
                                " WHERE hour >= ? ORDER BY hour", (int(since) - int(since) % 3600,))
            return [ActivityRow(*row) for row in rows]

        return await self._run(op)

    def _prune_activity(self, conn: sqlite3.Connection, now: float) -> int:
        """Hours older than the dashboard's longest view, a week, with a day to spare (inside ``prune``)."""
        return conn.execute("DELETE FROM activity_hourly WHERE hour < ?", (now - 8 * 24 * 3600,)).rowcount
