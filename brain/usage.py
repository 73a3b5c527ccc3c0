"""Token usage and cost per turn, and the daily budgets that cap them.

Budgets end a learner's day with a friendly message, not an error: a tutor
that runs out says so kindly and says when it is back.  With a memory service
the learner is the *person* (``person:<id>``), so a budget follows them across
their linked chat apps; ``/forget`` erases their rows with everything else.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from brain.sqlite_file import SqliteFile
from brain.types import Usage
from gateway.store.schema import Schema


def today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


@dataclass(frozen=True)
class DayUsage:
    """One partner's model use on one UTC day, all its learners together (the console's dashboard)."""

    day: str
    partner: str
    tokens: int
    cost: float
    turns: int


class UsageLedger(SqliteFile):
    schema = Schema("usage ledger", ("""
        CREATE TABLE IF NOT EXISTS usage_daily (day TEXT NOT NULL, partner TEXT NOT NULL, learner TEXT NOT NULL,
            tokens INTEGER NOT NULL, cost REAL NOT NULL, turns INTEGER NOT NULL, PRIMARY KEY (day, partner, learner));
    """,), owns_file=False)  # brain.db, beside the session log

    def _record(self, partner: str, learner: str, usage: Usage) -> None:
        tokens = usage.prompt_tokens + usage.completion_tokens
        with self._lock:
            self._connect().execute(
                "INSERT INTO usage_daily (day, partner, learner, tokens, cost, turns) VALUES (?, ?, ?, ?, ?, 1)"
                " ON CONFLICT (day, partner, learner) DO UPDATE SET tokens = tokens + excluded.tokens,"
                " cost = cost + excluded.cost, turns = turns + 1",
                (today(), partner, learner, tokens, usage.cost),
            )

    def _spent(self, partner: str, learner: str | None) -> int:
        with self._lock:
            if learner is None:
                row = self._connect().execute(
                    "SELECT COALESCE(SUM(tokens), 0) FROM usage_daily WHERE day = ? AND partner = ?", (today(), partner)
                ).fetchone()
            else:
                row = self._connect().execute(
                    "SELECT COALESCE(SUM(tokens), 0) FROM usage_daily WHERE day = ? AND partner = ? AND learner = ?",
                    (today(), partner, learner),
                ).fetchone()
        return int(row[0])

    async def record(self, partner: str, learner: str, usage: Usage) -> None:
        await asyncio.to_thread(self._record, partner, learner, usage)

    async def spent_today(self, partner: str, learner: str | None = None) -> int:
        """Tokens used today by one learner with this partner, or by the whole partner (learner None)."""
        return await asyncio.to_thread(self._spent, partner, learner)

    def _merge(self, old: str, new: str) -> None:
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN")
            conn.execute(
                "INSERT INTO usage_daily (day, partner, learner, tokens, cost, turns)"
                " SELECT day, partner, ?, tokens, cost, turns FROM usage_daily WHERE learner = ? AND true"
                " ON CONFLICT (day, partner, learner) DO UPDATE SET tokens = tokens + excluded.tokens,"
                " cost = cost + excluded.cost, turns = turns + excluded.turns",
                (new, old),
            )
            conn.execute("DELETE FROM usage_daily WHERE learner = ?", (old,))
            conn.execute("COMMIT")

    async def merge(self, old: str, new: str) -> None:
        """Count ``old``'s usage as ``new``'s (two linked identities share one budget)."""
        await asyncio.to_thread(self._merge, old, new)

    async def forget(self, learner: str) -> int:
        """Erase a learner's rows (``/forget``): the rows removed."""

        def delete() -> int:
            with self._lock:
                return self._connect().execute("DELETE FROM usage_daily WHERE learner = ?", (learner,)).rowcount

        return await asyncio.to_thread(delete)

    async def by_day(self, since_day: str) -> list[DayUsage]:
        """Per day and partner from ``since_day`` (``YYYY-MM-DD``) on, all learners together, oldest first."""

        def read() -> list[DayUsage]:
            with self._lock:
                rows = self._connect().execute(
                    "SELECT day, partner, SUM(tokens), SUM(cost), SUM(turns) FROM usage_daily WHERE day >= ?"
                    " GROUP BY day, partner ORDER BY day, partner", (since_day,)).fetchall()
            return [DayUsage(day, partner, int(tokens), float(cost), int(turns)) for day, partner, tokens, cost, turns in rows]

        return await asyncio.to_thread(read)
