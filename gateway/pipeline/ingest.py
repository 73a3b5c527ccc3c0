"""Ingest: the channel-facing sink that makes an inbound event durable, once.

``accept`` returns only after the messages are committed -- dedup key and
inbox row in one write -- which is when a channel may acknowledge the
platform.  Redelivered events are counted and dropped here; new ones are
handed to the dispatcher without waiting for it.

Platforms that push events give an answer only seconds (Slack, Feishu, QQ:
3 s; WeCom 5 s; ``ack_deadline_s``) before they count the delivery failed and
send it again.  A commit that takes more than half of that is logged and
counted (``partners_slow_accepts``): the store is the one thing here that can
make a channel miss its deadline, and the redeliveries it causes are
otherwise only seen as dedup hits.  That is the early warning; a webhook
channel's ack clock (``channels._kit.ack``) reports the miss itself through
:meth:`Ingest.late_ack`, counted in ``partners_late_acks_total``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence

from gateway.core.capabilities import ChannelCapabilities
from gateway.core.messages import Address, InboundMessage
from gateway.metrics import Metrics
from gateway.store import InboxStore

log = logging.getLogger(__name__)


class Ingest:
    def __init__(
        self,
        channel: str,
        account: str,
        capabilities: ChannelCapabilities,
        store: InboxStore,
        metrics: Metrics,
        dispatch: Callable[[InboundMessage], None],
        on_event: Callable[[], None] = lambda: None,
        on_undelivered: Callable[[Address, str], Awaitable[None]] | None = None,
    ) -> None:
        self.channel, self.account = channel, account
        self.retention_s = capabilities.redelivery_horizon_s
        self.ack_deadline_s = capabilities.ack_deadline_s
        self.store = store
        self.metrics = metrics
        self.dispatch = dispatch
        self.on_event = on_event
        self.on_undelivered = on_undelivered

    async def accept(self, messages: Sequence[InboundMessage]) -> None:
        if not messages:
            return
        for message in messages:
            if (message.address.channel, message.address.account) != (self.channel, self.account):
                raise ValueError(
                    f"{self.channel}:{self.account} tried to accept a message addressed to "
                    f"{message.address.channel}:{message.address.account}"
                )
        started = time.monotonic()
        fresh = await self.store.accept(messages, self.retention_s)
        took = time.monotonic() - started
        if self.ack_deadline_s is not None and took > self.ack_deadline_s / 2:
            self.metrics.slow_accepts.labels(self.channel, self.account).inc()
            log.warning("accept slow platform=%s account=%s took_s=%.2f ack_deadline_s=%g: the platform may send it again",
                        self.channel, self.account, took, self.ack_deadline_s)
        self.on_event()
        for message, new in zip(messages, fresh, strict=True):
            if new:
                self.metrics.messages_in.labels(self.channel, self.account).inc()
                log.info("message in platform=%s account=%s chat=%s event=%s sender=%s",
                         self.channel, self.account, message.address.conversation.key, message.event_id, message.sender.user)
                self.dispatch(message)
            else:
                self.metrics.dedup_hits.labels(self.channel, self.account).inc()
                log.info("redelivery ignored platform=%s account=%s event=%s", self.channel, self.account, message.event_id)

    def invalid(self, reason: str) -> None:
        self.metrics.dropped.labels(self.channel, self.account, "invalid event").inc()
        log.warning("invalid event dropped platform=%s account=%s reason=%s", self.channel, self.account, reason)

    def late_ack(self, took_s: float, deadline_s: float) -> None:
        """The channel's ack clock saw a webhook answered past its deadline (it logged the times)."""
        self.metrics.late_acks.labels(self.channel, self.account).inc()

    async def undelivered(self, target: Address, reason: str) -> None:
        self.metrics.undelivered.labels(self.channel, self.account).inc()
        log.warning("message not delivered platform=%s account=%s chat=%s reason=%s",
                    self.channel, self.account, target.conversation.key, reason)
        if self.on_undelivered is not None:
            await self.on_undelivered(target, reason)

    def refused(self, rule: str, detail: str) -> None:
        self.metrics.dropped.labels(self.channel, self.account, rule).inc()
        log.info("event refused platform=%s account=%s rule=%s detail=%s", self.channel, self.account, rule, detail)
