"""The long-poll loop: fetch a batch, make it durable, and only then move the cursor on.

Platforms that hand out events by long polling (Telegram's ``getUpdates``, the
test relay platform, Zulip's event queue, WeChat's ``getupdates``) confirm a
batch when the next request names a later cursor.  The order here is the whole
delivery guarantee::

    fetch(cursor) -> sink.accept(messages) -> cursors.put(next cursor) -> fetch(next cursor)

A crash anywhere before ``put`` makes the platform hand the same batch out
again, and the gateway's dedup answers it once; nothing is confirmed that is
not durable.  The channel supplies :class:`Fetch` -- one request, decoded --
and the loop owns the order, the heartbeat and the retries (:mod:`channels._kit.retry`):
every answer, empty or not, is a sign of life; a batch is an event; a
transient error waits in place with the kit's one backoff (a ``RateLimited``
for its ``retry_after``), and the supervisor restarts the account only when
those waits run out or the error is permanent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from channels._kit.retry import RECONNECT, Retries, Sleep
from gateway.core.channel import CursorStore, Heartbeat, InboundSink
from gateway.core.messages import InboundMessage
from gateway.core.retry import RetryPolicy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batch:
    """What one poll brought: the messages decoded from it, and the cursor that confirms them."""

    messages: Sequence[InboundMessage]
    cursor: str | None
    """The position to store once ``messages`` are durable; None when the poll moved nothing on."""


class Fetch(Protocol):
    """One long poll from ``cursor`` (None: from wherever the platform starts), decoded.

    Events that cannot be decoded are the channel's to record (``sink.invalid``) and leave out of the
    batch -- but their position still counts in ``cursor``, or they would block the queue forever.
    Platform errors are raised as the gateway's error tree."""

    async def __call__(self, cursor: str | None) -> Batch: ...


async def poll(fetch: Fetch, *, sink: InboundSink, cursors: CursorStore, heartbeat: Heartbeat, cursor_name: str = "offset",
               policy: RetryPolicy = RECONNECT, sleep: Sleep = asyncio.sleep, what: str = "long poll") -> None:
    """Run the loop until cancelled; raise when the platform keeps failing or refuses for good."""
    cursor = await cursors.get(cursor_name)
    retries = Retries(heartbeat, policy=policy, sleep=sleep, what=what)
    while True:
        try:
            batch = await fetch(cursor)
        except Exception as error:
            await retries.pause(error)  # raises what no wait in place can fix
            continue
        retries.succeeded()
        heartbeat.beat()
        if batch.messages:
            await sink.accept(batch.messages)
            heartbeat.event()
        if batch.cursor is not None and batch.cursor != cursor:
            await cursors.put(cursor_name, batch.cursor)
            cursor = batch.cursor
