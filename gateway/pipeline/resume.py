"""Resume: pick up what the store left pending, at start and again once a failing store writes again.

A failed store write (a full disk) ends the dispatch or the turn it belonged to; the
message stays ``pending`` (or its reply ``ready``) in the store, which is durable, but
nothing in memory holds it any more.  A start resumes such work from the store; so does
:class:`StoreWatch`, without a restart: while the store fails it tries a small write every
``RETRY_S`` seconds, and once writes work again it resumes everything pending that no
dispatcher queue or lane still has in hand -- so nothing is answered twice, and a turn
is only re-run for a message whose turn was lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from gateway.metrics import Metrics
from gateway.pipeline.dispatch import Dispatcher
from gateway.pipeline.lanes import Lanes
from gateway.pipeline.outbox import Outbox
from gateway.store import InboxStore, OutboxStore, ReplyState, StoreUpkeep
from gateway.store.health import StoreState


class ResumeStore(InboxStore, OutboxStore, StoreUpkeep, Protocol):
    """What resuming uses of the store: what is open in the inbox and outbox, and whether writes work."""

log = logging.getLogger(__name__)

RETRY_S = 1.0
"""How often a failing store is tried again: a write of a few kilobytes, so cheap enough to repeat."""


async def resume(store: ResumeStore, outbox: Outbox, dispatcher: Dispatcher, lanes: Lanes,
                 running: Callable[[str, str], bool]) -> tuple[int, int]:
    """Wake delivery for ready replies and hand pending messages nothing holds to the dispatcher;
    return (replies, messages) resumed.

    Replies first, so a conversation's answers keep their order.  They are woken through the
    outbox, as every written reply is, and delivery takes on only those it does not already have
    in hand.  A STREAMING row belongs to a turn that was cut short; that turn re-runs from its
    still-pending messages and picks the row (and its on-screen preview) up again."""
    replies = await store.open_replies()
    pending = await store.open_inbound()
    # No await from here on: what a lane or the dispatcher holds cannot change under the checks.
    resumed_replies = 0
    for item in replies:
        if item.state is ReplyState.READY and outbox.wake(item.reply.idempotency_key, item.reply.target):
            resumed_replies += 1
    resumed_messages = 0
    for entry in pending:
        message = entry.message
        held = dispatcher.holds(message.dedup_key) or lanes.holds(message.dedup_key)
        if running(message.address.channel, message.address.account) and not held:
            dispatcher.submit(message, recovered=True)
            resumed_messages += 1
    return resumed_replies, resumed_messages


class StoreWatch:
    """Follows the store's health into the metrics, and resumes pending work when it recovers."""

    def __init__(self, store: ResumeStore, outbox: Outbox, dispatcher: Dispatcher, lanes: Lanes,
                 running: Callable[[str, str], bool], metrics: Metrics) -> None:
        self.store, self.outbox, self.dispatcher, self.lanes = store, outbox, dispatcher, lanes
        self.running, self.metrics = running, metrics
        self._recoveries = store.health.condition().recoveries
        self._failing = False

    async def run(self) -> None:
        while True:
            await asyncio.sleep(RETRY_S)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("store watch failed; will try again")

    async def check(self) -> None:
        """Try a failing store once; resume pending work if it recovered since the last check."""
        if self.store.health.condition().state is StoreState.FAILING:
            try:
                await self.store.probe_write()
            except Exception:  # still failing: the health records it, the error log said so when it began
                log.debug("store still failing", exc_info=True)
        condition = self.store.health.condition()
        failing = condition.state is StoreState.FAILING
        if failing and not self._failing:
            log.error("store writes fail; accepted work waits until they work again error=%s", condition.error)
        self._failing = failing
        self.metrics.store_failing.set(1 if failing else 0)
        if condition.recoveries == self._recoveries:
            return
        self._recoveries = condition.recoveries
        replies, messages = await resume(self.store, self.outbox, self.dispatcher, self.lanes, self.running)
        self.metrics.store_resumed.inc(replies + messages)
        log.warning("store writes again; resumed replies=%d pending_messages=%d", replies, messages)
