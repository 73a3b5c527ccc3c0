"""The activity log: the counters' growth added to the store's hourly sums, against a real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.activity import HOUR, ActivityLog, summarize
from gateway.metrics import Metrics
from gateway.store.activity import ActivityRow
from gateway.store.sqlite import SqliteStore

NOW = 1_800_000_000.0 // HOUR * HOUR + 1800


class FailingOnce:
    """A store whose first write fails (a full disk, say); later ones go to the real store."""

    def __init__(self, store: SqliteStore) -> None:
        self.store, self.failed = store, False

    async def add_activity(self, rows):
        if not self.failed:
            self.failed = True
            raise OSError("disk full")
        await self.store.add_activity(rows)


@pytest.fixture
async def store(tmp_path: Path):
    opened = SqliteStore(tmp_path / "gateway.db")
    await opened.open()
    yield opened
    await opened.close()


async def test_growth_is_added_per_hour_and_a_fresh_counter_counts_from_zero(store):
    metrics = Metrics()
    log = ActivityLog(metrics, store, lambda channel, account: "algebra" if account == "a" else "")
    metrics.messages_in.labels("webchat", "a").inc(3)
    metrics.dropped.labels("webchat", "b", "no partner").inc()
    assert await log.flush(NOW) == 2
    assert await log.flush(NOW) == 0  # nothing grew: nothing written
    metrics.messages_in.labels("webchat", "a").inc(2)
    await log.flush(NOW + HOUR)
    restarted = Metrics()  # a gateway restart: its counters start from zero
    again = ActivityLog(restarted, store, lambda channel, account: "algebra")
    restarted.messages_in.labels("webchat", "a").inc()
    await again.flush(NOW + HOUR)
    rows = await store.activity_since(NOW - HOUR)
    hours = {(r.hour - int(NOW) // HOUR * HOUR, r.measure, r.label): (r.partner, r.value) for r in rows}
    assert hours == {(0, "in", ""): ("algebra", 3.0), (0, "drop", "no partner"): ("", 1.0), (HOUR, "in", ""): ("algebra", 3.0)}


async def test_a_failed_write_is_written_with_the_next_flush(store):
    metrics = Metrics()
    log = ActivityLog(metrics, FailingOnce(store), lambda channel, account: "")  # type: ignore[arg-type]
    metrics.messages_out.labels("webchat", "a").inc()
    with pytest.raises(OSError):
        await log.flush(NOW)
    await log.flush(NOW)
    assert [(r.measure, r.value) for r in await store.activity_since(NOW - HOUR)] == [("out", 1.0)]


def test_a_summary_puts_rows_in_their_bars_and_leaves_out_older_ones():
    start = int(NOW) // HOUR * HOUR
    def row(hour: int, measure: str, label: str, value: float) -> ActivityRow:
        return ActivityRow(hour, "algebra", "webchat", "a", measure, label, value)

    rows = [row(start, "in", "", 2), row(start - 2 * HOUR, "in", "", 1),
            row(start - 30 * HOUR, "in", "", 7),  # outside the day
            row(start, "latency", "1.0", 4), row(start, "latency", "+Inf", 4)]
    day = summarize(rows, "day", NOW, [])
    assert len(day.buckets) == 24 and day.buckets[-1].start == start
    assert [b.messages_in for b in day.buckets[-3:]] == [1, 0, 2]
    assert day.totals.messages_in == 3
    assert day.buckets[-1].latency_p50_s == pytest.approx(0.5)
    week = summarize(rows, "week", NOW, [])
    assert len(week.buckets) == 7 and week.totals.messages_in == 10


async def test_flushes_at_once_add_the_growth_once(store):
    import asyncio

    metrics = Metrics()
    log = ActivityLog(metrics, store, lambda channel, account: "")
    metrics.messages_in.labels("webchat", "a").inc(5)
    await asyncio.gather(*(log.flush(NOW) for _ in range(4)))  # the sweep and dashboard requests together
    assert [(r.measure, r.value) for r in await store.activity_since(NOW - HOUR)] == [("in", 5.0)]
