"""Outbound pacing: token buckets per chat and per account, and when to retry.

Every platform limits how fast a bot may send -- per chat, per group, per bot
-- and sending faster earns a 429 at best and a ban at worst (Discord bans after
10,000 invalid requests in ten minutes; a DingTalk robot is blocked for ten).
So the one outbound path waits *before* it sends, at the rates each channel
declares in ``channels/platforms.toml``.  When a platform still says "slow
down", its ``retry_after`` blocks the whole bucket it hit -- every later send to
that chat (or, for a global limit, every send of the account) waits it out, not
just the request that was refused.

:class:`RetryPolicy` (from :mod:`gateway.core.retry`, where the channel kit's
transports read it too) decides whether and when a failed send is tried again.  It
is the only retry layer: channels never retry (STYLE: retries stacked in two
layers were one of nanobot's scars).

Time comes from a :class:`Clock`, so the arithmetic is tested in virtual time.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

from gateway.core.capabilities import ChannelCapabilities, SendRate
from gateway.core.errors import RateLimited
from gateway.core.retry import RetryPolicy

__all__ = ["Clock", "MonotonicClock", "Pacer", "RetryPolicy", "TokenBucket"]

log = logging.getLogger(__name__)

_EPSILON = 1e-9
"""Float slack: a token that exact arithmetic leaves at 0.9999999999 is a token."""

_MIN_HIGH_WATER = 1024
"""Below this many tracked chats, only the periodic sweep evicts."""


class Clock(Protocol):
    """Where pacing reads the time and waits; tests hand in a virtual clock."""

    def now(self) -> float:
        """Monotonic seconds; only differences matter."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """The real clock.  Monotonic, so a wall-clock jump neither refills nor drains a bucket."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class TokenBucket:
    """``rate`` sends per ``per`` seconds, with room for ``burst`` at once.

    The bucket starts full.  Waiters queue on a lock and are served in arrival
    order, so a busy chat cannot overtake a message that has waited longer.
    """

    def __init__(self, rate: float, per: float, burst: int, clock: Clock) -> None:
        if not (rate > 0 and per > 0 and burst >= 1):
            raise ValueError(f"a token bucket needs rate > 0, per > 0, burst >= 1; got rate={rate} per={per} burst={burst}")
        self.rate, self.per, self.burst = float(rate), float(per), int(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._updated = clock.now()
        self._blocked_until = -math.inf
        self._waiters = 0
        self._lock = asyncio.Lock()

    @classmethod
    def from_rate(cls, rate: SendRate, clock: Clock) -> TokenBucket:
        return cls(rate.rate, rate.per, rate.burst, clock)

    @classmethod
    def unlimited(cls, clock: Clock) -> TokenBucket:
        """A bucket that never paces but can still be penalized.

        Platforms enforce limits they do not publish (Matrix homeservers, a
        Zulip chat); their 429 must still hold back that scope.
        """
        return cls(math.inf, 1.0, 1, clock)

    async def acquire(self) -> None:
        """Wait until a token is free (and any penalty has lifted), then take it."""
        self._waiters += 1
        try:
            async with self._lock:
                while (wait := self._wait_time(self._clock.now())) > 0:
                    await self._clock.sleep(wait)
                self._tokens = max(0.0, self._tokens - 1.0)
        finally:
            self._waiters -= 1

    def penalize(self, retry_after: float) -> None:
        """Block the bucket until ``now + retry_after``; a penalty never shortens an earlier one.

        When the block lifts the bucket holds exactly one token and refills
        from there: one send may go at once, but not a burst, which would
        likely earn another 429.
        """
        now = self._clock.now()
        until = now + max(0.0, retry_after)
        if until <= self._blocked_until:
            return
        self._refill(now)
        self._blocked_until = until
        self._tokens = 1.0
        self._updated = max(self._updated, until)

    def is_idle(self) -> bool:
        """Full, unblocked and nobody waiting: a fresh bucket would behave the same, so dropping it loses nothing."""
        now = self._clock.now()
        self._refill(now)
        return self._waiters == 0 and now >= self._blocked_until and self._tokens >= self.burst - _EPSILON

    def _refill(self, now: float) -> None:
        if now < self._updated:
            return  # refilling is paused until a penalty lifts
        if math.isinf(self.rate):
            self._tokens = float(self.burst)
        else:
            self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.rate / self.per)
        self._updated = now

    def _wait_time(self, now: float) -> float:
        """Seconds until a token may be taken; 0.0 when one may be taken now."""
        self._refill(now)
        if now < self._blocked_until:
            return self._blocked_until - now  # then look at the tokens again
        if self._tokens >= 1.0 - _EPSILON:
            return 0.0
        return (1.0 - self._tokens) * self.per / self.rate


class Pacer:
    """Paces one channel account's sends by the rates its capabilities declare.

    One pacer per account: platforms count per bot token.  Every send passes a
    per-chat bucket (the group rate for groups when declared, else the chat
    rate) and the account's global bucket.  A scope with no declared rate gets
    an unlimited bucket, which still honours a platform's ``retry_after``.

    Per-chat buckets are created on first use and swept when idle (see
    :meth:`TokenBucket.is_idle`): every ``sweep_interval`` seconds, or sooner
    when the table has doubled since the last sweep, so memory follows the
    chats active right now, not every chat ever served.
    """

    def __init__(self, capabilities: ChannelCapabilities, *, clock: Clock | None = None, sweep_interval: float = 60.0) -> None:
        self._clock: Clock = clock or MonotonicClock()
        self._platform = capabilities.platform
        self._chat_rate = capabilities.send_rate_chat
        self._group_rate = capabilities.send_rate_group or capabilities.send_rate_chat
        self._global = self._bucket(capabilities.send_rate_global)
        self._chats: dict[str, TokenBucket] = {}
        self._sweep_interval = sweep_interval
        self._last_sweep = self._clock.now()
        self._high_water = _MIN_HIGH_WATER

    @property
    def tracked_chats(self) -> int:
        """How many per-chat buckets are held right now."""
        return len(self._chats)

    @asynccontextmanager
    async def slot(self, chat_key: str, is_group: bool) -> AsyncIterator[None]:
        """Wait for the chat's bucket, then the account's, and send inside the block.

        The chat is awaited first so a send queued behind a slow chat does not
        hold a global token meanwhile.  A :class:`RateLimited` raised inside the
        block penalizes the bucket it names before it propagates, so a caller
        cannot forget to.
        """
        self._maybe_sweep()
        await self._chat_bucket(chat_key, is_group).acquire()
        await self._global.acquire()
        try:
            yield
        except RateLimited as err:
            self.rate_limited(chat_key, err, is_group=is_group)
            raise

    def rate_limited(self, chat_key: str, err: RateLimited, *, is_group: bool = False) -> None:
        """Apply a platform's ``retry_after`` to the bucket it hit: the account's for ``scope="global"``, else the chat's.

        ``is_group`` only matters if the chat's bucket has been swept and must be made again.
        """
        log.info(
            "rate limited platform=%s chat=%s scope=%s retry_after=%g", self._platform, chat_key, err.scope, err.retry_after
        )
        bucket = self._global if err.scope == "global" else self._chat_bucket(chat_key, is_group)
        bucket.penalize(err.retry_after)

    def evict_idle(self) -> int:
        """Drop every idle per-chat bucket; returns how many were dropped."""
        idle = [key for key, bucket in self._chats.items() if bucket.is_idle()]
        for key in idle:
            del self._chats[key]
        self._last_sweep = self._clock.now()
        self._high_water = max(_MIN_HIGH_WATER, 2 * len(self._chats))
        if idle:
            log.debug("evicted idle buckets platform=%s evicted=%d kept=%d", self._platform, len(idle), len(self._chats))
        return len(idle)

    def _maybe_sweep(self) -> None:
        if len(self._chats) >= self._high_water or self._clock.now() - self._last_sweep >= self._sweep_interval:
            self.evict_idle()

    def _chat_bucket(self, chat_key: str, is_group: bool) -> TokenBucket:
        bucket = self._chats.get(chat_key)
        if bucket is None:
            bucket = self._chats[chat_key] = self._bucket(self._group_rate if is_group else self._chat_rate)
        return bucket

    def _bucket(self, rate: SendRate | None) -> TokenBucket:
        return TokenBucket.from_rate(rate, self._clock) if rate else TokenBucket.unlimited(self._clock)
