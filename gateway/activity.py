"""What the gateway did, hour by hour, kept in the store for the console's dashboard.

The Prometheus counters (:mod:`gateway.metrics`) live in memory and start again from zero when the
gateway restarts, so a chart of the last day or week cannot be drawn from them.  Rather than have
every pipeline step write a second tally, :class:`ActivityLog` reads the counters the pipeline
already keeps -- the one place that counts -- and adds what grew since its last reading to the
hour's sums in the store (``activity_hourly``, :mod:`gateway.store.activity`).  It reads every few
seconds (the gateway's sweep) and once more when the gateway stops, so a crash loses at most the
last few seconds' counts; a counter that went down (a restart) counts from zero again.

Latencies are kept as the histogram's cumulative buckets, so p50 and p99 over any span are read
from summed buckets (:func:`quantile`), at the buckets' resolution.  :func:`summarize` turns the
rows a viewer may see into the dashboard's numbers; model tokens and cost come from the brain's
usage ledger, which keeps them per day.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterable
from enum import Enum

from prometheus_client import Counter, Histogram
from pydantic import BaseModel

from gateway.metrics import Metrics
from gateway.store.activity import ActivityRow, ActivityStore

log = logging.getLogger(__name__)

HOUR = 3600
Key = tuple[str, str, str, str, str]
"""(partner, channel, account, measure, label)"""


class Measure(str, Enum):
    IN = "in"
    OUT = "out"
    DROP = "drop"
    ERROR = "error"
    LATENCY = "latency"
    """A cumulative histogram bucket: its label is the bucket's upper bound in seconds (``+Inf`` last)."""
    LATENCY_COUNT = "latency_count"
    LATENCY_SUM = "latency_sum"
    MODEL_ERROR = "model_error"


class ActivityLog:
    """Adds what the gateway's counters grew by to the store's hourly sums.

    ``partner_of(channel, account)`` names the partner bound to the whole account (''
    for none), so a chart per partner needs no join with a config that may change."""

    def __init__(self, metrics: Metrics, store: ActivityStore, partner_of: Callable[[str, str], str]) -> None:
        self.metrics, self.store, self.partner_of = metrics, store, partner_of
        self._last: dict[Key, float] = {}
        self._lock = asyncio.Lock()
        """The sweep and a dashboard request may flush at once: both would add the same growth."""

    def readings(self) -> dict[Key, float]:
        """Every counter's value now, keyed as it is stored."""
        m = self.metrics
        found: dict[Key, float] = {}
        self._counter(found, m.messages_in, Measure.IN, None)
        self._counter(found, m.messages_out, Measure.OUT, None)
        self._counter(found, m.dropped, Measure.DROP, "reason")
        self._counter(found, m.dedup_hits, Measure.DROP, None, label="redelivered")
        self._counter(found, m.errors, Measure.ERROR, "kind")
        self._counter(found, m.dead_letters, Measure.ERROR, None, label="gave up")
        self._histogram(found, m.send_latency)
        for metric in m.model_errors.collect():
            for sample in metric.samples:
                if sample.name.endswith("_total"):
                    key = (sample.labels["partner"], "", "", Measure.MODEL_ERROR.value, sample.labels["kind"])
                    found[key] = found.get(key, 0.0) + sample.value
        return found

    def _counter(self, found: dict[Key, float], counter: Counter, measure: Measure, label_name: str | None,
                 label: str = "") -> None:
        for metric in counter.collect():
            for sample in metric.samples:
                if not sample.name.endswith("_total"):
                    continue
                channel, account = sample.labels["channel"], sample.labels["account"]
                key = (self.partner_of(channel, account), channel, account, measure.value,
                       sample.labels[label_name] if label_name else label)
                found[key] = found.get(key, 0.0) + sample.value

    def _histogram(self, found: dict[Key, float], histogram: Histogram) -> None:
        for metric in histogram.collect():
            for sample in metric.samples:
                channel, account = sample.labels["channel"], sample.labels["account"]
                partner = self.partner_of(channel, account)
                if sample.name.endswith("_bucket"):
                    found[(partner, channel, account, Measure.LATENCY.value, sample.labels["le"])] = sample.value
                elif sample.name.endswith("_count"):
                    found[(partner, channel, account, Measure.LATENCY_COUNT.value, "")] = sample.value
                elif sample.name.endswith("_sum"):
                    found[(partner, channel, account, Measure.LATENCY_SUM.value, "")] = sample.value

    async def flush(self, now: float | None = None) -> int:
        """Write what grew since the last flush into the current hour; returns the rows written.

        The readings are remembered only once the write succeeded, so a failed write is
        retried with the next flush rather than lost."""
        async with self._lock:
            return await self._flush(now)

    async def _flush(self, now: float | None) -> int:
        current = self.readings()
        hour = int(now if now is not None else time.time()) // HOUR * HOUR
        rows = []
        for key, value in current.items():
            before = self._last.get(key, 0.0)
            grown = value - before if value >= before else value
            if grown > 0:
                rows.append(ActivityRow(hour, *key, value=grown))
        await self.store.add_activity(rows)
        self._last = current
        return len(rows)


def quantile(buckets: dict[str, float], q: float) -> float | None:
    """The ``q`` quantile of cumulative histogram buckets (upper bound -> count), interpolated within
    its bucket; None without observations.  Above the last finite bound it is that bound."""
    bounds = sorted(((math.inf if le == "+Inf" else float(le)), count) for le, count in buckets.items())
    if not bounds or bounds[-1][1] <= 0:
        return None
    target = q * bounds[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in bounds:
        if count >= target and count > below:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (target - below) / (count - below)
        lower, below = (bound if not math.isinf(bound) else lower), count
    return lower


class Counts(BaseModel):
    """What a bar and a table row both count: the same sums, so the page draws and tabulates one shape."""

    messages_in: int = 0
    messages_out: int = 0
    drops: int = 0
    errors: int = 0
    latency_p50_s: float | None = None
    latency_p99_s: float | None = None


class Bucket(Counts):
    """One bar of the charts: an hour (the day view) or a day (the week view)."""

    start: int
    """Unix seconds (UTC)."""


class Breakdown(Counts):
    """The span's sums for one partner on one channel account."""

    partner: str
    channel: str
    account: str


class ModelUse(BaseModel):
    """One partner's model use in the span (the brain's ledger keeps it per UTC day)."""

    partner: str
    tokens: int
    cost: float
    turns: int


class Summary(BaseModel):
    """The dashboard's numbers over one span; the page draws these and the JSON twin returns them."""

    span: str
    since: int
    bucket_s: int
    buckets: list[Bucket]
    totals: Breakdown
    rows: list[Breakdown]
    drops_by_reason: dict[str, int]
    errors_by_kind: dict[str, int]
    model_errors_by_kind: dict[str, int]
    models: list[ModelUse]


SPANS = {"day": (24 * HOUR, HOUR), "week": (7 * 24 * HOUR, 24 * HOUR)}
"""span -> (how far back, one bar's width), in seconds."""


def summarize(rows: Iterable[ActivityRow], span: str, now: float, models: list[ModelUse]) -> Summary:
    """The dashboard over ``span`` (``day`` or ``week``) ending at ``now``, from rows already filtered
    to what the viewer may see."""
    length, width = SPANS[span]
    last = int(now) // width * width
    first = last - (length // width - 1) * width
    buckets = {start: Bucket(start=start) for start in range(first, last + 1, width)}
    latencies: dict[int, dict[str, float]] = {start: {} for start in buckets}
    per: dict[tuple[str, str, str], Breakdown] = {}
    per_latency: dict[tuple[str, str, str], dict[str, float]] = {}
    total_latency: dict[str, float] = {}
    drops: dict[str, int] = {}
    errors: dict[str, int] = {}
    model_errors: dict[str, int] = {}
    for row in rows:
        start = row.hour // width * width
        if start not in buckets:
            continue
        bar, n = buckets[start], int(row.value)
        if row.measure == Measure.MODEL_ERROR.value:
            model_errors[row.label] = model_errors.get(row.label, 0) + n
            continue
        key = (row.partner, row.channel, row.account)
        line = per.setdefault(key, Breakdown(partner=row.partner, channel=row.channel, account=row.account))
        if row.measure == Measure.IN.value:
            bar.messages_in += n
            line.messages_in += n
        elif row.measure == Measure.OUT.value:
            bar.messages_out += n
            line.messages_out += n
        elif row.measure == Measure.DROP.value:
            bar.drops += n
            line.drops += n
            drops[row.label] = drops.get(row.label, 0) + n
        elif row.measure == Measure.ERROR.value:
            bar.errors += n
            line.errors += n
            errors[row.label] = errors.get(row.label, 0) + n
        elif row.measure == Measure.LATENCY.value:
            for sums in (latencies[start], per_latency.setdefault(key, {}), total_latency):
                sums[row.label] = sums.get(row.label, 0.0) + row.value
    for start, bar in buckets.items():
        bar.latency_p50_s, bar.latency_p99_s = quantile(latencies[start], 0.5), quantile(latencies[start], 0.99)
    for key, line in per.items():
        line.latency_p50_s, line.latency_p99_s = quantile(per_latency.get(key, {}), 0.5), quantile(per_latency.get(key, {}), 0.99)
    lines = sorted(per.values(), key=lambda b: (b.partner, b.channel, b.account))
    totals = Breakdown(partner="", channel="", account="",
                       messages_in=sum(b.messages_in for b in lines), messages_out=sum(b.messages_out for b in lines),
                       drops=sum(b.drops for b in lines), errors=sum(b.errors for b in lines),
                       latency_p50_s=quantile(total_latency, 0.5), latency_p99_s=quantile(total_latency, 0.99))
    return Summary(span=span, since=first, bucket_s=width, buckets=list(buckets.values()), totals=totals, rows=lines,
                   drops_by_reason=dict(sorted(drops.items())), errors_by_kind=dict(sorted(errors.items())),
                   model_errors_by_kind=dict(sorted(model_errors.items())), models=models)
