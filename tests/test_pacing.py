"""Pacing in virtual time: a FakeClock moves only when a test advances it, so
every assertion is about *when* (in virtual seconds) a send may go, never about
how fast the machine is."""

from __future__ import annotations

import asyncio
import heapq
import itertools

import pytest
from pydantic import ValidationError

from gateway.core.capabilities import ChannelCapabilities, Dialect, SendRate, TextUnit
from gateway.core.errors import (
    AuthFailed,
    BadRequest,
    ChannelUnavailable,
    ConfigError,
    NotFound,
    PeerUnavailable,
    RateLimited,
    ReplyWindowClosed,
    Unsupported,
)
from gateway.pacing import Pacer, RetryPolicy, TokenBucket
from tests.waits import HANG_S


class FakeClock:
    """Virtual time.  ``sleep`` parks the caller until ``advance`` moves time past its deadline."""

    def __init__(self) -> None:
        self._now = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + max(0.0, seconds), next(self._order), future))
        await future

    async def advance(self, seconds: float) -> None:
        """Move time forward, waking sleepers in deadline order and letting each run before the next."""
        target = self._now + seconds
        await settle()
        while self._sleepers and self._sleepers[0][0] <= target:
            deadline, _, future = heapq.heappop(self._sleepers)
            self._now = max(self._now, deadline)
            if not future.done():
                future.set_result(None)
            await settle()
        self._now = target
        await settle()


async def settle() -> None:
    """Let every runnable task run until it blocks again."""
    for _ in range(20):
        await asyncio.sleep(0)


def caps(
    chat: SendRate | None = None, group: SendRate | None = None, global_: SendRate | None = None
) -> ChannelCapabilities:
    return ChannelCapabilities(
        platform="test",
        text_limit=1000,
        text_unit=TextUnit.CHARS,
        dialect=Dialect.PLAIN,
        elements=frozenset({"text"}),
        send_rate_chat=chat,
        send_rate_group=group,
        send_rate_global=global_,
    )


def start(coro) -> asyncio.Task:
    return asyncio.ensure_future(coro)


async def send(pacer: Pacer, chat: str, *, is_group: bool = False) -> None:
    async with pacer.slot(chat, is_group):
        pass


async def sent_at(clock: FakeClock, pacer: Pacer, chat: str, *, is_group: bool = False) -> float:
    await send(pacer, chat, is_group=is_group)
    return clock.now()


# --- TokenBucket -----------------------------------------------------------


async def test_burst_goes_at_once_then_the_next_waits_for_a_refill():
    clock = FakeClock()
    bucket = TokenBucket(rate=1, per=1, burst=3, clock=clock)
    for _ in range(3):
        await asyncio.wait_for(bucket.acquire(), timeout=HANG_S)  # no virtual time needed
    assert clock.now() == 0.0

    fourth = start(bucket.acquire())
    await clock.advance(0.99)
    assert not fourth.done()
    await clock.advance(0.01)
    assert fourth.done()


async def test_queued_waiters_are_spaced_by_the_rate_in_arrival_order():
    clock = FakeClock()
    bucket = TokenBucket(rate=2, per=1, burst=1, clock=clock)
    await bucket.acquire()
    done: list[tuple[int, float]] = []

    async def waiter(n: int) -> None:
        await bucket.acquire()
        done.append((n, clock.now()))

    tasks = [start(waiter(n)) for n in range(3)]
    await clock.advance(5)
    await asyncio.gather(*tasks)
    assert done == [(0, 0.5), (1, 1.0), (2, 1.5)]


async def test_rate_over_a_longer_period_is_exact():
    clock = FakeClock()
    bucket = TokenBucket(rate=20, per=60, burst=1, clock=clock)  # Telegram's group rate
    await bucket.acquire()
    nxt = start(bucket.acquire())
    await clock.advance(2.999)
    assert not nxt.done()
    await clock.advance(0.001)
    assert nxt.done()


@pytest.mark.parametrize("rate,per,burst", [(0, 1, 1), (1, 0, 1), (1, 1, 0), (-1, 1, 1)])
def test_bucket_rejects_nonsense_rates(rate, per, burst):
    with pytest.raises(ValueError):
        TokenBucket(rate=rate, per=per, burst=burst, clock=FakeClock())


async def test_penalize_blocks_a_full_bucket_until_retry_after():
    clock = FakeClock()
    bucket = TokenBucket(rate=1, per=1, burst=3, clock=clock)
    bucket.penalize(5)
    blocked = start(bucket.acquire())
    await clock.advance(4.99)
    assert not blocked.done()
    await clock.advance(0.01)
    assert blocked.done()


async def test_penalty_arriving_while_waiting_extends_the_wait():
    clock = FakeClock()
    bucket = TokenBucket(rate=1, per=1, burst=1, clock=clock)
    await bucket.acquire()
    waiting = start(bucket.acquire())  # would go at t=1
    await clock.advance(0.5)
    bucket.penalize(3)  # blocked until t=3.5
    await clock.advance(2.9)
    assert not waiting.done()
    await clock.advance(0.1)
    assert waiting.done()
    assert clock.now() == pytest.approx(3.5)


async def test_a_shorter_penalty_does_not_shorten_a_longer_one():
    clock = FakeClock()
    bucket = TokenBucket(rate=1, per=1, burst=1, clock=clock)
    bucket.penalize(10)
    bucket.penalize(1)
    blocked = start(bucket.acquire())
    await clock.advance(9.9)
    assert not blocked.done()
    await clock.advance(0.1)
    assert blocked.done()


async def test_after_a_penalty_no_burst_one_send_then_the_rate():
    clock = FakeClock()
    bucket = TokenBucket(rate=1, per=1, burst=5, clock=clock)
    bucket.penalize(10)
    times: list[float] = []

    async def sender() -> None:
        for _ in range(3):
            await bucket.acquire()
            times.append(clock.now())

    task = start(sender())
    await clock.advance(20)
    await task
    assert times == [10.0, 11.0, 12.0]


async def test_a_cancelled_waiter_does_not_take_a_token():
    clock = FakeClock()
    bucket = TokenBucket(rate=1, per=1, burst=1, clock=clock)
    await bucket.acquire()
    doomed = start(bucket.acquire())
    await settle()
    doomed.cancel()
    await settle()
    nxt = start(bucket.acquire())
    await clock.advance(1)
    assert nxt.done() and clock.now() == 1.0


async def test_unlimited_bucket_never_waits_but_honours_a_penalty():
    clock = FakeClock()
    bucket = TokenBucket.unlimited(clock)
    for _ in range(100):
        await asyncio.wait_for(bucket.acquire(), timeout=HANG_S)
    bucket.penalize(2)
    blocked = start(bucket.acquire())
    await clock.advance(1.9)
    assert not blocked.done()
    await clock.advance(0.1)
    assert blocked.done()


# --- Pacer -----------------------------------------------------------------

TELEGRAM_LIKE = caps(
    chat=SendRate(rate=1, per=1, burst=3),
    group=SendRate(rate=20, per=60, burst=5),
    global_=SendRate(rate=30, per=1, burst=30),
)


async def test_chats_are_paced_independently():
    clock = FakeClock()
    pacer = Pacer(TELEGRAM_LIKE, clock=clock)
    for _ in range(3):
        await send(pacer, "a")
    a4 = start(send(pacer, "a"))
    await settle()
    assert not a4.done()  # chat a spent its burst ...
    await asyncio.wait_for(send(pacer, "b"), timeout=HANG_S)  # ... chat b did not
    await clock.advance(1)
    assert a4.done()


async def test_groups_use_the_group_rate():
    clock = FakeClock()
    pacer = Pacer(TELEGRAM_LIKE, clock=clock)
    for _ in range(5):  # group burst is 5, the private-chat burst only 3
        await asyncio.wait_for(send(pacer, "g", is_group=True), timeout=HANG_S)
    sixth = start(sent_at(clock, pacer, "g", is_group=True))
    await clock.advance(10)
    assert await sixth == 3.0  # 20 per minute


async def test_groups_fall_back_to_the_chat_rate_when_no_group_rate_is_declared():
    clock = FakeClock()
    pacer = Pacer(caps(chat=SendRate(rate=5, per=5, burst=2)), clock=clock)
    for _ in range(2):
        await send(pacer, "g", is_group=True)
    third = start(sent_at(clock, pacer, "g", is_group=True))
    await clock.advance(5)
    assert await third == 1.0


async def test_the_global_bucket_is_shared_by_all_chats():
    clock = FakeClock()
    pacer = Pacer(caps(global_=SendRate(rate=2, per=1, burst=2)), clock=clock)
    await send(pacer, "a")
    await send(pacer, "b")
    third = start(sent_at(clock, pacer, "c"))
    await clock.advance(5)
    assert await third == 0.5


async def test_no_declared_rate_means_no_waiting():
    pacer = Pacer(caps(), clock=FakeClock())
    for n in range(200):
        await asyncio.wait_for(send(pacer, f"chat{n % 3}"), timeout=HANG_S)


async def test_chat_scoped_429_blocks_only_that_chat():
    clock = FakeClock()
    pacer = Pacer(TELEGRAM_LIKE, clock=clock)
    pacer.rate_limited("a", RateLimited("test", retry_after=4))
    a = start(sent_at(clock, pacer, "a"))
    await asyncio.wait_for(send(pacer, "b"), timeout=HANG_S)
    await clock.advance(10)
    assert await a == 4.0


async def test_global_scoped_429_blocks_every_chat():
    clock = FakeClock()
    pacer = Pacer(TELEGRAM_LIKE, clock=clock)
    pacer.rate_limited("a", RateLimited("test", retry_after=2, scope="global"))
    others = [start(sent_at(clock, pacer, chat)) for chat in ("b", "c")]
    await clock.advance(5)
    b, c = await asyncio.gather(*others)
    assert b == 2.0
    assert c == pytest.approx(2.0 + 1 / 30)  # one token when the block lifts, then 30/s again


async def test_429_is_honoured_where_the_platform_publishes_no_rate():
    clock = FakeClock()
    pacer = Pacer(caps(global_=SendRate(rate=10, per=1, burst=100)), clock=clock)  # Mattermost-like
    pacer.rate_limited("a", RateLimited("test", retry_after=3))
    a = start(sent_at(clock, pacer, "a"))
    await asyncio.wait_for(send(pacer, "b"), timeout=HANG_S)
    await clock.advance(5)
    assert await a == 3.0


async def test_rate_limited_raised_inside_a_slot_penalizes_that_chat():
    clock = FakeClock()
    pacer = Pacer(TELEGRAM_LIKE, clock=clock)
    with pytest.raises(RateLimited):
        async with pacer.slot("a", False):
            raise RateLimited("test", retry_after=6)
    a = start(sent_at(clock, pacer, "a"))
    await clock.advance(10)
    assert await a == 6.0


async def test_idle_chats_are_evicted_and_busy_ones_kept():
    clock = FakeClock()
    pacer = Pacer(caps(chat=SendRate(rate=1, per=1, burst=3)), clock=clock)
    for n in range(1000):
        await send(pacer, f"chat{n}")
    pacer.rate_limited("penalized", RateLimited("test", retry_after=100))
    for _ in range(3):
        await send(pacer, "busy")
    waiter = start(send(pacer, "busy"))  # still waiting for a token
    await settle()
    assert pacer.tracked_chats == 1002

    assert pacer.evict_idle() == 0  # every chat has spent a token, none has refilled
    await clock.advance(0.99)
    assert pacer.evict_idle() == 0
    await clock.advance(0.01)  # t=1: the 1000 are full again; busy's waiter takes its token
    await waiter
    assert pacer.evict_idle() == 1000
    await clock.advance(3)  # busy refills to its burst
    assert pacer.evict_idle() == 1
    assert pacer.tracked_chats == 1  # the penalized chat stays until its block lifts
    await clock.advance(100)
    assert pacer.evict_idle() == 1
    assert pacer.tracked_chats == 0


async def test_a_bucket_with_a_waiter_is_kept_even_when_loop_lag_let_it_refill():
    clock = FakeClock()
    pacer = Pacer(caps(chat=SendRate(rate=1, per=1, burst=2)), clock=clock)
    for _ in range(2):
        await send(pacer, "a")
    waiter = start(send(pacer, "a"))
    await settle()
    clock._now = 5.0  # time passed but the loop has not yet woken the waiter
    assert pacer.evict_idle() == 0
    await clock.advance(0)
    await waiter


async def test_a_sweep_runs_on_its_own_once_the_interval_passed():
    clock = FakeClock()
    pacer = Pacer(caps(chat=SendRate(rate=1, per=10, burst=1)), clock=clock, sweep_interval=30)
    for n in range(50):
        await send(pacer, f"chat{n}")
    await clock.advance(29)
    await send(pacer, "late")
    assert pacer.tracked_chats == 51  # interval not reached
    await clock.advance(1)
    await send(pacer, "later")
    assert pacer.tracked_chats == 2  # the 50 refilled and went; "late" is still spent


async def test_a_flood_of_new_chats_triggers_a_sweep_before_the_interval():
    clock = FakeClock()
    pacer = Pacer(caps(), clock=clock, sweep_interval=3600)  # unlimited buckets are idle at once
    for n in range(5000):
        await send(pacer, f"chat{n}")
    assert pacer.tracked_chats <= 1024


async def test_an_evicted_chat_comes_back_with_exactly_a_fresh_burst():
    clock = FakeClock()
    pacer = Pacer(TELEGRAM_LIKE, clock=clock)
    await send(pacer, "a")
    await clock.advance(3)
    assert pacer.evict_idle() == 1
    for _ in range(3):
        await asyncio.wait_for(send(pacer, "a"), timeout=HANG_S)
    fourth = start(sent_at(clock, pacer, "a"))
    await clock.advance(2)
    assert await fourth == 4.0


# --- RetryPolicy -----------------------------------------------------------

POLICY = RetryPolicy(base_delay=1.0, max_delay=30.0, max_attempts=5, jitter=0.5)


@pytest.mark.parametrize(
    "error",
    [
        AuthFailed("test", "token revoked", code=401),
        BadRequest("test", "bad payload", code=400),
        NotFound("test", "chat gone", code=404),
        Unsupported("test", "no edits"),
        ReplyWindowClosed("test", "token expired"),
        ConfigError("missing token", field="token"),
        ChannelUnavailable("extra not installed"),
    ],
)
def test_permanent_errors_are_not_retried(error):
    assert POLICY.delay_for(1, error) is None


def test_rate_limited_waits_retry_after_plus_a_little_jitter():
    for _ in range(200):
        delay = POLICY.delay_for(1, RateLimited("test", retry_after=3))
        assert delay is not None and 3.0 <= delay <= 3.5


def test_retry_after_beyond_max_delay_is_still_honoured():
    delay = POLICY.delay_for(2, RateLimited("test", retry_after=600))
    assert delay is not None and delay >= 600


def test_transient_errors_back_off_exponentially_with_full_jitter():
    err = PeerUnavailable("test", "502 bad gateway", code=502)
    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0)]:
        samples = [POLICY.delay_for(attempt, err) for _ in range(300)]
        assert all(d is not None and 0.0 <= d <= ceiling for d in samples)
        assert max(samples) > ceiling / 2  # the range really grows (fails with odds 2**-300)


def test_backoff_is_capped_at_max_delay():
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0, max_attempts=10_000)
    samples = [policy.delay_for(9_000, PeerUnavailable("test", "down")) for _ in range(100)]
    assert all(d is not None and 0.0 <= d <= 5.0 for d in samples)


def test_unknown_exceptions_are_retried_but_bounded():
    assert POLICY.delay_for(1, RuntimeError("bug in a channel")) is not None
    assert POLICY.delay_for(4, KeyError("x")) is not None
    assert POLICY.delay_for(5, KeyError("x")) is None


@pytest.mark.parametrize("error", [RateLimited("test", retry_after=1), PeerUnavailable("test", "down")])
def test_attempts_are_exhausted_at_max_attempts(error):
    assert POLICY.delay_for(4, error) is not None
    assert POLICY.delay_for(5, error) is None


def test_attempts_start_at_one():
    with pytest.raises(ValueError):
        POLICY.delay_for(0, PeerUnavailable("test", "down"))


def test_policy_is_frozen_and_validated():
    with pytest.raises(ValidationError):
        POLICY.max_attempts = 9  # type: ignore[misc]
    with pytest.raises(ValidationError):
        RetryPolicy(base_delay=10, max_delay=1)
    with pytest.raises(ValidationError):
        RetryPolicy(max_attempts=0)
