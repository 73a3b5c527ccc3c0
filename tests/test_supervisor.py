"""The supervisor under real asyncio with small timings.

Restart backoff is handed a recording ``sleep``, so delays are checked as
numbers and never waited for.  The watchdog runs on real time (tenths of a
second); assertions wait for an outcome with a generous deadline and never
assert how fast something happened.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from gateway.core.channel import ChannelState
from gateway.core.errors import AuthFailed, ChannelUnavailable, ConfigError, PeerUnavailable
from gateway.supervisor import Backoff, Health, Heartbeat, Supervisor
from tests.waits import HANG_S

RUNNING, ERROR, ACTION_REQUIRED, STOPPED = (
    ChannelState.RUNNING,
    ChannelState.ERROR,
    ChannelState.ACTION_REQUIRED,
    ChannelState.STOPPED,
)


class RecordedSleep:
    """Stands in for the backoff wait: records each delay and the health at that moment, waits for nothing."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.health: list[dict[str, Health]] = []
        self.supervisor: Supervisor | None = None

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        if self.supervisor is not None:
            self.health.append(self.supervisor.health())
        await asyncio.sleep(0)


async def eventually(predicate: Callable[[], bool], timeout: float = HANG_S) -> None:
    """Wait until ``predicate()`` holds; the deadline only turns a hang into a failure."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def forever() -> None:
    await asyncio.Event().wait()


@pytest.fixture
def sleeps() -> RecordedSleep:
    return RecordedSleep()


@pytest.fixture
async def supervisor(sleeps: RecordedSleep):
    sup = Supervisor(backoff=Backoff(base=1, cap=8, reset_after=60), sleep=sleeps, cancel_grace=1)
    sleeps.supervisor = sup
    yield sup
    await sup.stop(timeout=HANG_S)


def state_of(sup: Supervisor, name: str) -> ChannelState:
    return sup.health()[name].state


async def test_a_running_unit_reports_its_health(supervisor):
    async def unit(hb: Heartbeat) -> None:
        hb.set_state(RUNNING)
        hb.beat()
        hb.event()
        await forever()

    supervisor.start("telegram:main", unit, stall_after=5)
    await eventually(lambda: supervisor.health()["telegram:main"].last_event_at is not None)
    health = supervisor.health()["telegram:main"]
    assert health.state is RUNNING
    assert health.reason is None
    assert health.restarts == 0
    assert health.last_heartbeat_at is not None and health.last_heartbeat_at >= health.since
    assert health.next_restart_at is None
    with pytest.raises(ValidationError):
        health.state = STOPPED  # a snapshot, not a live view


async def test_the_pipeline_can_record_an_event_for_a_unit(supervisor):
    async def unit(hb: Heartbeat) -> None:  # a webhook channel: events reach the gateway, not the unit
        hb.set_state(RUNNING)
        await forever()

    supervisor.start("u", unit)
    await eventually(lambda: state_of(supervisor, "u") is RUNNING)
    assert supervisor.health()["u"].last_event_at is None
    supervisor.note_event("u")
    supervisor.note_event("not-a-unit")  # ignored: a late event for a unit never started
    assert supervisor.health()["u"].last_event_at is not None


async def test_a_crashing_unit_is_restarted_with_growing_backoff(supervisor, sleeps):
    runs = 0

    async def unit(hb: Heartbeat) -> None:
        nonlocal runs
        runs += 1
        if runs > 6:
            await forever()
        hb.set_state(RUNNING)
        raise PeerUnavailable("telegram", "bad gateway", code=502)

    supervisor.start("u", unit)
    await eventually(lambda: runs == 7)
    delays = sleeps.delays
    assert len(delays) == 6
    for delay, ceiling in zip(delays, [1, 2, 4, 8, 8, 8], strict=True):
        assert ceiling / 2 <= delay <= ceiling
    assert delays[:4] == sorted(delays[:4])  # grows until the cap
    during_backoff = sleeps.health[-1]["u"]
    assert during_backoff.state is ERROR
    assert during_backoff.reason == "telegram says 502: bad gateway"
    assert during_backoff.next_restart_at is not None
    assert supervisor.health()["u"].restarts == 6


async def test_an_unknown_exception_is_restarted_too(supervisor, sleeps):
    runs = 0

    async def unit(hb: Heartbeat) -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise RuntimeError("boom")
        hb.set_state(RUNNING)
        await forever()

    supervisor.start("u", unit)
    await eventually(lambda: state_of(supervisor, "u") is RUNNING)
    assert sleeps.health[0]["u"].reason == "RuntimeError: boom"
    assert supervisor.health()["u"].restarts == 1


async def test_urls_in_foreign_error_text_are_cut_to_their_host(supervisor, sleeps):
    async def unit(hb: Heartbeat) -> None:
        if not sleeps.delays:
            raise RuntimeError(
                "GET https://api.telegram.org/bot123:SECRET/getUpdates?offset=1 failed; wss://bot:PASSWORD@chat.example/ws"
            )
        await forever()

    supervisor.start("u", unit)
    await eventually(lambda: len(sleeps.health) == 1)
    reason = sleeps.health[0]["u"].reason
    assert reason == "RuntimeError: GET https://api.telegram.org/… failed; wss://chat.example/…"


async def test_a_connection_failure_a_transport_did_not_word_is_said_in_plain_words(supervisor, sleeps):
    """The shared fallback: raw library text (httpx's "All connection attempts failed") is not the whole reason."""
    import socket

    import httpx

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]

    async def unit(hb: Heartbeat) -> None:
        if not sleeps.delays:
            async with httpx.AsyncClient(trust_env=False) as client:
                await client.get(f"http://127.0.0.1:{port}/bot123:SECRET/getMe")
        await forever()

    supervisor.start("u", unit)
    await eventually(lambda: len(sleeps.health) == 1)
    reason = sleeps.health[0]["u"].reason
    assert reason.startswith("a connection failed (connection refused)"), reason
    assert "SECRET" not in reason


async def test_backoff_starts_over_after_a_healthy_run(sleeps):
    supervisor = Supervisor(backoff=Backoff(base=1, cap=8, reset_after=0.05), sleep=sleeps)
    runs = 0

    async def unit(hb: Heartbeat) -> None:
        nonlocal runs
        runs += 1
        if runs > 5:
            await forever()
        hb.set_state(RUNNING)
        if runs == 4:  # this run stays healthy past reset_after before it fails
            await asyncio.sleep(0.1)
            hb.beat()
        raise PeerUnavailable("slack", "socket dropped")

    supervisor.start("u", unit)
    try:
        await eventually(lambda: runs == 6)
    finally:
        await supervisor.stop(timeout=HANG_S)
    ceilings = [1, 2, 4, 1, 2]  # failures 1, 2, 3, then counted from 1 again
    assert len(sleeps.delays) == 5
    for delay, ceiling in zip(sleeps.delays, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling


async def test_a_stalled_run_is_not_counted_healthy_for_its_silence(sleeps):
    supervisor = Supervisor(backoff=Backoff(base=1, cap=8, reset_after=0.1), sleep=sleeps)
    runs = 0

    async def unit(hb: Heartbeat) -> None:
        nonlocal runs
        runs += 1
        if runs <= 2:
            hb.set_state(RUNNING)  # then silence, longer than reset_after
        else:
            hb.set_state(ACTION_REQUIRED, "parked by the test")
        await forever()

    supervisor.start("u", unit, stall_after=0.15)
    try:
        await eventually(lambda: runs == 3)
    finally:
        await supervisor.stop(timeout=HANG_S)
    first, second = sleeps.delays
    assert 0.5 <= first <= 1 and 1 <= second <= 2  # no reset between the two stalls


async def test_auth_failed_needs_a_human_and_is_not_restarted(supervisor, sleeps):
    runs = 0
    fixed = False

    async def unit(hb: Heartbeat) -> None:
        nonlocal runs
        runs += 1
        if not fixed:
            raise AuthFailed("telegram", "token revoked", code=401)
        hb.set_state(RUNNING)
        await forever()

    supervisor.start("u", unit, stall_after=5)
    await eventually(lambda: state_of(supervisor, "u") is ACTION_REQUIRED)
    await asyncio.sleep(0.05)  # time in which a restart loop would have run again
    assert runs == 1
    assert sleeps.delays == []
    health = supervisor.health()["u"]
    assert health.reason == "telegram says 401: token revoked"
    assert health.next_restart_at is None

    fixed = True  # the operator put in a new token
    await supervisor.restart("u")
    await eventually(lambda: state_of(supervisor, "u") is RUNNING)
    assert runs == 2
    assert supervisor.health()["u"].restarts == 1


@pytest.mark.parametrize(
    "error",
    [ConfigError("is missing", file="gateway.yaml", field="telegram.token"), ChannelUnavailable("install the telegram extra")],
)
async def test_configuration_problems_need_a_human(supervisor, sleeps, error):
    async def unit(hb: Heartbeat) -> None:
        raise error

    supervisor.start("u", unit)
    await eventually(lambda: state_of(supervisor, "u") is ACTION_REQUIRED)
    assert supervisor.health()["u"].reason == str(error)
    assert sleeps.delays == []


async def test_the_watchdog_restarts_a_stalled_unit(supervisor, sleeps):
    runs = 0
    cancelled: list[int] = []

    async def unit(hb: Heartbeat) -> None:
        nonlocal runs
        runs += 1
        hb.set_state(RUNNING)
        if runs == 1:  # a long poll that never returns
            try:
                await forever()
            except asyncio.CancelledError:
                cancelled.append(runs)
                raise
        while True:  # a healthy transport
            hb.beat()
            await asyncio.sleep(0.01)

    supervisor.start("u", unit, stall_after=0.2)
    await eventually(lambda: runs == 2)
    assert cancelled == [1]
    stalled = sleeps.health[0]["u"]
    assert stalled.state is ERROR
    assert stalled.reason == "stalled: no sign of life for 0.2 s"
    await asyncio.sleep(0.5)  # more than twice stall_after
    assert runs == 2  # the beating run is left alone
    assert state_of(supervisor, "u") is RUNNING


async def test_a_unit_waiting_for_a_human_is_not_watched_until_it_runs_again(supervisor, sleeps):
    runs = 0
    scanned = asyncio.Event()

    async def unit(hb: Heartbeat) -> None:
        nonlocal runs
        runs += 1
        hb.set_state(ACTION_REQUIRED, "scan the QR code")
        if runs == 1:
            await scanned.wait()
            hb.set_state(RUNNING)  # ... and then falls silent
        await forever()

    supervisor.start("u", unit, stall_after=0.05)
    await asyncio.sleep(0.3)
    assert runs == 1
    assert supervisor.health()["u"].reason == "scan the QR code"
    scanned.set()
    await eventually(lambda: runs == 2)
    assert sleeps.health[0]["u"].reason == "stalled: no sign of life for 0.05 s"


async def test_stop_cancels_units_then_drains(supervisor):
    order: list[str] = []

    def unit_named(name: str):
        async def unit(hb: Heartbeat) -> None:
            hb.set_state(RUNNING)
            try:
                await forever()
            finally:
                order.append(name)

        return unit

    async def drain() -> None:
        order.append("drain")

    supervisor.start("a", unit_named("a"))
    supervisor.start("b", unit_named("b"))
    await eventually(lambda: all(h.state is RUNNING for h in supervisor.health().values()))
    assert await supervisor.stop(drain, timeout=HANG_S) is True
    assert sorted(order[:2]) == ["a", "b"] and order[2:] == ["drain"]
    assert {name: (h.state, h.reason) for name, h in supervisor.health().items()} == {
        "a": (STOPPED, "shutdown"),
        "b": (STOPPED, "shutdown"),
    }


async def test_stop_reports_a_drain_that_overruns_its_timeout(supervisor):
    drain_cancelled = asyncio.Event()

    async def drain() -> None:
        try:
            await forever()
        except asyncio.CancelledError:
            drain_cancelled.set()
            raise

    assert await supervisor.stop(drain, timeout=0.05) is False
    assert drain_cancelled.is_set()


async def test_stop_reports_a_drain_that_fails(supervisor):
    async def drain() -> None:
        raise RuntimeError("outbox unreachable")

    assert await supervisor.stop(drain, timeout=1) is False


async def test_stop_cancels_a_restart_that_is_waiting_out_its_backoff():
    supervisor = Supervisor(backoff=Backoff(base=30, cap=60))  # real sleep: the restart is 15-30 s away

    async def unit(hb: Heartbeat) -> None:
        raise PeerUnavailable("zulip", "queue expired")

    supervisor.start("u", unit)
    await eventually(lambda: supervisor.health()["u"].next_restart_at is not None)
    assert supervisor.health()["u"].state is ERROR
    assert await supervisor.stop(timeout=HANG_S) is True
    health = supervisor.health()["u"]
    assert (health.state, health.next_restart_at) == (STOPPED, None)


async def test_restart_ends_the_old_run_before_starting_the_new_one(supervisor):
    active = 0
    most_active = 0
    runs = 0

    async def unit(hb: Heartbeat) -> None:
        nonlocal active, most_active, runs
        runs += 1
        active += 1
        most_active = max(most_active, active)
        try:
            hb.set_state(RUNNING)
            await forever()
        finally:
            await asyncio.sleep(0.02)  # a slow clean-up (closing a socket)
            active -= 1

    supervisor.start("u", unit)
    await eventually(lambda: runs == 1)
    await supervisor.restart("u")
    await eventually(lambda: runs == 2 and state_of(supervisor, "u") is RUNNING)
    assert most_active == 1
    assert supervisor.health()["u"].restarts == 1


async def test_heartbeats_from_an_ended_run_are_ignored(supervisor):
    heartbeats: list[Heartbeat] = []

    async def unit(hb: Heartbeat) -> None:
        heartbeats.append(hb)
        if len(heartbeats) == 1:
            raise PeerUnavailable("matrix", "sync failed")
        hb.set_state(RUNNING)
        await forever()

    supervisor.start("u", unit)
    await eventually(lambda: state_of(supervisor, "u") is RUNNING)
    old = heartbeats[0]
    old.set_state(ERROR, "ghost")
    old.event()
    health = supervisor.health()["u"]
    assert (health.state, health.reason, health.last_event_at) == (RUNNING, None, None)


async def test_a_unit_that_returns_is_stopped_not_restarted(supervisor, sleeps):
    runs = 0

    async def unit(hb: Heartbeat) -> None:
        nonlocal runs
        runs += 1
        hb.set_state(RUNNING)

    supervisor.start("u", unit)
    await eventually(lambda: state_of(supervisor, "u") is STOPPED)
    assert supervisor.health()["u"].reason == "exited"
    assert sleeps.delays == []
    await supervisor.restart("u")
    await eventually(lambda: runs == 2)


async def test_names_are_unique_and_known(supervisor):
    supervisor.start("u", lambda hb: forever())
    with pytest.raises(ValueError):
        supervisor.start("u", lambda hb: forever())
    with pytest.raises(ValueError):
        supervisor.start("v", lambda hb: forever(), stall_after=0)
    with pytest.raises(KeyError):
        await supervisor.restart("nope")


async def test_a_stopped_supervisor_starts_nothing():
    supervisor = Supervisor()
    assert await supervisor.stop(timeout=HANG_S) is True
    with pytest.raises(RuntimeError):
        supervisor.start("u", lambda hb: forever())


def test_backoff_delays_double_up_to_the_cap_within_their_jitter():
    backoff = Backoff(base=1, cap=10, jitter=0.5)
    for failures, ceiling in [(1, 1), (2, 2), (3, 4), (4, 8), (5, 10), (500, 10)]:
        for _ in range(100):
            assert ceiling / 2 <= backoff.delay(failures) <= ceiling
    assert Backoff(base=2, cap=10, jitter=0).delay(2) == 4


def test_backoff_jitter_above_one_half_is_refused():
    with pytest.raises(ValidationError):
        Backoff(jitter=0.6)


async def test_halt_stops_one_unit_with_its_reason_until_restarted(supervisor):
    runs: list[Heartbeat] = []
    ended = asyncio.Event()

    async def unit(heartbeat: Heartbeat) -> None:
        runs.append(heartbeat)
        heartbeat.set_state(RUNNING)
        try:
            await forever()
        finally:
            ended.set()

    supervisor.start("a", unit)
    supervisor.start("b", unit)
    await eventually(lambda: len(runs) == 2 and all(h.state is RUNNING for h in supervisor.health().values()))
    await supervisor.halt("a", "disabled by root")
    assert ended.is_set()  # the run was cancelled, not left behind
    health = supervisor.health()
    assert (health["a"].state, health["a"].reason) == (STOPPED, "disabled by root")
    assert health["b"].state is RUNNING  # the other unit runs on
    runs[0].set_state(RUNNING)  # a leftover of the halted run cannot report it alive
    assert supervisor.health()["a"].state is STOPPED
    await supervisor.restart("a")
    await eventually(lambda: supervisor.health()["a"].state is RUNNING)
    assert len(runs) == 3


async def test_a_unit_registered_stopped_runs_only_once_restarted(supervisor):
    runs: list[Heartbeat] = []

    async def unit(heartbeat: Heartbeat) -> None:
        runs.append(heartbeat)
        heartbeat.set_state(RUNNING)
        await forever()

    supervisor.start("a", unit, stall_after=0.05, stopped="disabled by root")
    await asyncio.sleep(0.1)  # longer than stall_after: a stopped unit is not watched
    assert runs == []
    assert (supervisor.health()["a"].state, supervisor.health()["a"].reason) == (STOPPED, "disabled by root")
    await supervisor.restart("a")
    await eventually(lambda: supervisor.health()["a"].state is RUNNING)
    assert len(runs) == 1
    with pytest.raises(KeyError):
        await supervisor.halt("nobody", "x")
