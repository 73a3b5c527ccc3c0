"""Per-session event feeds: what the web chat page receives over Server-Sent Events.

Every browser session has a bounded backlog of recent events.  A page that
reconnects says which event it saw last (``Last-Event-ID``) and gets the rest,
so a network blip loses nothing the backlog still holds.

Memory is bounded twice over: a backlog holds at most ``backlog`` events and
``backlog_bytes`` of them as sent (the newest event always stays), and at most
``max_sessions`` sessions are held (an unfollowed one is evicted for a new
one).  When a backlog is over either bound, what goes first is an event a
later one *replaces* -- each edit of a streamed preview carries the whole
text so far, and the page would only overwrite the older copy -- and only
then the oldest event.  So a long streamed reply does not push the rest of
the conversation out, and a reconnecting page loses nothing it would show.  Event ids are
integers shared by all sessions of one channel and seeded from the clock, so
ids keep growing across a gateway restart and a page never skips new events
because an older run used the same numbers.

Feeds live in memory only: the durable record of a reply is the gateway's
outbox, and a session nobody follows for ``idle_ttl_s`` is forgotten.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class FeedsFull(Exception):
    """Every feed slot is taken by a session someone is following right now."""


@dataclass(frozen=True)
class FeedEvent:
    id: int
    name: str
    data: dict[str, Any]
    replaces: str | None = None
    """Events with the same key supersede each other (a message's id: its edits)."""
    wire: bytes = field(init=False, repr=False, compare=False)
    """The event as sent, encoded once: what every follower gets and what the byte budget counts."""

    def __post_init__(self) -> None:
        payload = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        object.__setattr__(self, "wire", f"id: {self.id}\nevent: {self.name}\ndata: {payload}\n\n".encode())

    def encode(self) -> bytes:
        return self.wire


class SessionFeed:
    """One session's backlog and the signal that wakes its followers."""

    def __init__(self, backlog: int, backlog_bytes: int) -> None:
        self.events: deque[FeedEvent] = deque()
        self.backlog = backlog
        self.backlog_bytes = backlog_bytes
        self.size = 0
        """Bytes of ``events`` as sent."""
        self._newest: dict[str, int] = {}
        """For each ``replaces`` key, the id of its newest event: any older one with that key is superseded."""
        self.followers = 0
        self.last_active = time.monotonic()
        self._signal = asyncio.Event()
        self.closed = False

    def append(self, event: FeedEvent) -> None:
        self.events.append(event)
        self.size += len(event.wire)
        if event.replaces is not None:
            self._newest[event.replaces] = event.id
        while len(self.events) > 1 and (len(self.events) > self.backlog or self.size > self.backlog_bytes):
            self._drop(self._first_superseded() or self.events[0])
        self.last_active = time.monotonic()
        self._wake()

    def _first_superseded(self) -> FeedEvent | None:
        return next((e for e in self.events if e.replaces is not None and self._newest[e.replaces] != e.id), None)

    def _drop(self, event: FeedEvent) -> None:
        self.events.remove(event)
        self.size -= len(event.wire)
        if event.replaces is not None and self._newest.get(event.replaces) == event.id:
            del self._newest[event.replaces]

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._signal.set()
        self._signal = asyncio.Event()

    async def follow(self, after: int, keepalive_s: float) -> AsyncIterator[FeedEvent | None]:
        """Yield events newer than ``after`` as they come, and ``None`` after each quiet ``keepalive_s``."""
        self.followers += 1
        try:
            while not self.closed:
                signal = self._signal  # taken before the check: a publish in between still wakes us
                newer = [event for event in self.events if event.id > after]
                if newer:
                    for event in newer:
                        yield event
                    after = newer[-1].id
                    continue
                try:
                    await asyncio.wait_for(signal.wait(), keepalive_s)
                except TimeoutError:
                    yield None
        finally:
            self.followers -= 1
            self.last_active = time.monotonic()


class SessionFeeds:
    """All sessions of one web chat account."""

    def __init__(self, *, backlog: int = 200, backlog_bytes: int = 256 * 1024, idle_ttl_s: float = 1800.0,
                 max_sessions: int = 1000) -> None:
        self.backlog = backlog
        self.backlog_bytes = backlog_bytes
        self.idle_ttl_s = idle_ttl_s
        self.max_sessions = max_sessions
        self._feeds: dict[str, SessionFeed] = {}
        self._last_id = time.time_ns() // 1000

    @property
    def last_id(self) -> int:
        return self._last_id

    def __len__(self) -> int:
        return len(self._feeds)

    def __contains__(self, session: object) -> bool:
        return session in self._feeds

    @property
    def size(self) -> int:
        """Bytes held in every session's backlog."""
        return sum(feed.size for feed in self._feeds.values())

    def feed(self, session: str) -> SessionFeed:
        """The session's feed, created on first use (evicting an idle one when full).

        Asking counts as activity, so a feed about to be followed is not swept meanwhile.
        """
        feed = self._feeds.get(session)
        if feed is None:
            if len(self._feeds) >= self.max_sessions:
                self._evict_one()
            feed = self._feeds[session] = SessionFeed(self.backlog, self.backlog_bytes)
        feed.last_active = time.monotonic()
        return feed

    def publish(self, session: str, name: str, data: dict[str, Any], *, replaces: str | None = None) -> FeedEvent:
        """Append an event to the session's feed; ``replaces``: it supersedes earlier events with that key."""
        self._last_id += 1
        event = FeedEvent(self._last_id, name, data, replaces)
        self.feed(session).append(event)
        return event

    def resume_point(self, last_seen: str | None) -> int:
        """Where to resume for a ``Last-Event-ID``: 0 (everything) when absent, garbled or from the future."""
        try:
            seen = int(last_seen) if last_seen else 0
        except ValueError:
            return 0
        return seen if 0 <= seen <= self._last_id else 0

    def sweep(self) -> int:
        """Forget sessions nobody follows that have been quiet for ``idle_ttl_s``; return how many."""
        cutoff = time.monotonic() - self.idle_ttl_s
        idle = [key for key, feed in self._feeds.items() if feed.followers == 0 and feed.last_active < cutoff]
        for key in idle:
            del self._feeds[key]
        if idle:
            log.debug("webchat sessions evicted count=%d remaining=%d", len(idle), len(self._feeds))
        return len(idle)

    def close(self) -> None:
        """End every follower's stream (the channel is closing)."""
        for feed in self._feeds.values():
            feed.close()
        self._feeds.clear()

    def _evict_one(self) -> None:
        unfollowed = [(feed.last_active, key) for key, feed in self._feeds.items() if feed.followers == 0]
        if not unfollowed:
            raise FeedsFull(f"all {self.max_sessions} web chat sessions are in use")
        _, key = min(unfollowed)
        del self._feeds[key]
        log.info("webchat session evicted reason=full remaining=%d", len(self._feeds))
