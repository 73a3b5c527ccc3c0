"""Prometheus metrics, one registry per gateway instance.

A per-instance registry (not the process-global default) keeps several
gateways in one process -- as the tests run them -- from colliding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from gateway.status import HttpStatus


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("channel", "account")
        self.messages_in = Counter("partners_messages_in", "Inbound messages accepted (new)", labels, registry=self.registry)
        self.dedup_hits = Counter("partners_dedup_hits", "Inbound events dropped as redeliveries", labels, registry=self.registry)
        self.dropped = Counter("partners_dropped", "Inbound messages not answered, by reason", (*labels, "reason"), registry=self.registry)
        self.messages_out = Counter("partners_messages_out", "Reply parts sent", labels, registry=self.registry)
        self.edits = Counter("partners_edits", "Preview edits sent", labels, registry=self.registry)
        self.errors = Counter("partners_errors", "Errors by kind", (*labels, "kind"), registry=self.registry)
        self.dead_letters = Counter("partners_dead_letters", "Replies given up on", labels, registry=self.registry)
        self.replies_short = Counter(
            "partners_replies_short", "Replies sent without some of their parts or files (over the platform's "
            "messages per inbound message or its file size limit)", labels, registry=self.registry,
        )
        self.slow_accepts = Counter(
            "partners_slow_accepts", "Inbound batches made durable later than half the platform's ack deadline",
            labels, registry=self.registry,
        )
        self.undelivered = Counter(
            "partners_undelivered", "Messages the platform took and later said never arrived (a failed status)",
            labels, registry=self.registry,
        )
        self.late_acks = Counter(
            "partners_late_acks", "Webhooks answered after the platform's ack deadline (it will send them again), "
            "as the channel's ack clock measured them", labels, registry=self.registry,
        )
        self.send_latency = Histogram(
            "partners_send_latency_seconds",
            "From inbound accepted to final reply sent",
            labels,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
            registry=self.registry,
        )
        self.queue_depth = Gauge("partners_queue_depth", "Items waiting", (*labels, "queue"), registry=self.registry)
        self.model_errors = Counter(
            "partners_model_errors", "Failed model attempts (each retry and backup counts), by kind",
            ("partner", "kind"), registry=self.registry,
        )
        """``kind`` is a ``brain.model.ModelErrorKind`` value: timeout, unreachable, transient, rate_limited, auth, ..."""
        self.store_failing = Gauge("partners_store_failing", "1 while the store's writes fail (disk full, I/O error)",
                                   registry=self.registry)
        self.store_resumed = Counter("partners_store_resumed",
                                     "Pending messages and replies resumed once the store wrote again", registry=self.registry)

    def watch_http(self, report: Callable[[], HttpStatus]) -> None:
        """Serve the HTTP server's connection counts, read from its ledger at each scrape."""
        self.registry.register(_HttpCollector(report))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _HttpCollector(Collector):
    """``partners_http_*``: read at scrape time, so the ledger stays the one place that counts."""

    def __init__(self, report: Callable[[], HttpStatus]) -> None:
        self._report = report

    def collect(self) -> Iterator[Metric]:
        now = self._report()
        yield GaugeMetricFamily("partners_http_connections", "Open HTTP connections", value=now.connections)
        yield GaugeMetricFamily("partners_http_streams", "Open event streams", value=now.streams)
        limits = GaugeMetricFamily("partners_http_limit", "Configured HTTP limits, and the open files limit", labels=["limit"])
        limits.add_metric(["max_connections"], now.max_connections)
        limits.add_metric(["max_streams"], now.max_streams)
        limits.add_metric(["max_streams_per_address"], now.max_streams_per_address)
        if now.open_files_limit is not None:
            limits.add_metric(["open_files"], now.open_files_limit)
        yield limits
        refused = CounterMetricFamily("partners_http_refused", "Requests refused at a limit, by what was full", labels=["limit"])
        refused.add_metric(["max_connections"], now.refused_connections)
        refused.add_metric(["max_streams"], now.refused_streams)
        yield refused
        yield CounterMetricFamily(
            "partners_http_header_timeouts", "Connections closed for not sending their headers in time", value=now.header_timeouts,
        )
