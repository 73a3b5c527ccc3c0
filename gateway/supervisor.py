"""Supervision of long-running units: one per channel account.

The failure users of chat gateways report most after duplicates is the quiet
one: a long poll that stalls after a network blip, a socket that stops
delivering without closing, while the status page says "connected".  So every
unit runs under a :class:`Supervisor` that

* restarts it when it crashes, after jittered exponential backoff that starts
  over once the unit has run healthy for a while;
* parks it in ``action_required`` when only a human can help (revoked token,
  bad configuration) instead of hammering the platform with a dead
  credential -- :meth:`Supervisor.restart` starts it again once fixed;
* cancels and restarts it when it shows no sign of life for ``stall_after``
  seconds.  A unit proves life by calling :meth:`Heartbeat.beat` whenever its
  transport moves (a poll returned, a frame arrived), so a stalled poll is
  caught although it never raises;
* keeps a :class:`Health` record per unit for the status endpoint;
* stops one unit on request (:meth:`Supervisor.halt`) and keeps it ``stopped``
  with the reason given -- an operator disabling a channel account -- until
  :meth:`Supervisor.restart`; a unit may also be registered already stopped
  (``start(..., stopped=reason)``), as one disabled before the gateway restarted.

Two runs of one unit never overlap: a restart waits for the old run to end
(two pollers on one Telegram token fight each other with 409 Conflict).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from gateway.core.channel import ChannelState
from gateway.core.errors import AuthFailed, ChannelUnavailable, ConfigError, GatewayError
from gateway.endpoints import why_unreachable

log = logging.getLogger(__name__)

_NEEDS_HUMAN = (AuthFailed, ConfigError, ChannelUnavailable)
"""Errors a restart cannot fix: a credential or a setting must change first."""

_MAX_REASON = 300
_URL = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?:[^/\s@'\"<>]*@)?(?P<host>[^/\s'\"<>?#]*)[^\s'\"<>]*", re.I)


_UNWATCHED = frozenset({ChannelState.ACTION_REQUIRED, ChannelState.STOPPED})
"""States in which a live unit may be silent: it waits for a human, or says it is done."""


class Health(BaseModel):
    """A snapshot of one unit, as the status endpoint shows it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    state: ChannelState
    reason: str | None = None
    since: datetime
    """When the unit entered ``state``."""
    restarts: int = 0
    last_event_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    next_restart_at: datetime | None = None


class Backoff(BaseModel):
    """Restart delays: doubling from ``base`` up to ``cap``, each shortened by up to ``jitter``.

    ``jitter`` is at most one half, so below the cap a later delay is never
    shorter than an earlier one while units that failed together still
    spread out.  The count of failures starts over once a run stayed
    ``running`` for ``reset_after`` seconds.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base: float = Field(default=1.0, gt=0)
    cap: float = Field(default=60.0, gt=0)
    jitter: float = Field(default=0.5, ge=0, le=0.5)
    reset_after: float = Field(default=60.0, gt=0)

    def delay(self, failures: int) -> float:
        """Seconds before the restart that follows the ``failures``-th failure in a row (1-based)."""
        ceiling = min(self.cap, self.base * 2.0 ** min(max(failures, 1) - 1, 64))
        return ceiling * (1.0 - self.jitter * random.random())


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False)
class _Unit:
    """The supervisor's live record of one unit; :class:`Health` is its public snapshot."""

    name: str
    factory: UnitFactory
    stall_after: float | None
    state: ChannelState = ChannelState.CONNECTING
    reason: str | None = None
    since: datetime = field(default_factory=_utcnow)
    runs: int = 0
    failures: int = 0
    generation: int = 0
    """Bumped when a run starts or ends, so heartbeats from a finished run are ignored."""
    last_life: float = 0.0
    """Monotonic time of the last sign of life, for the watchdog (wall clocks jump)."""
    running_since: float | None = None
    last_event_at: datetime | None = None
    last_heartbeat_at: datetime | None = None
    next_restart_at: datetime | None = None
    runner: asyncio.Task[None] | None = None

    def set_state(self, state: ChannelState, reason: str | None) -> None:
        if state is not self.state:
            self.since = _utcnow()
            log.info("unit state unit=%s state=%s reason=%r", self.name, state.value, reason)
        if state is ChannelState.RUNNING:
            if self.running_since is None:
                self.running_since = time.monotonic()
        else:
            self.running_since = None
        self.state, self.reason = state, reason

    def touch(self) -> None:
        self.last_life = time.monotonic()
        self.last_heartbeat_at = _utcnow()

    def begin_run(self) -> None:
        self.runs += 1
        self.generation += 1
        self.set_state(ChannelState.CONNECTING, None)
        self.last_life = time.monotonic()

    def ran_healthy_for(self, seconds: float, *, until: float) -> bool:
        """Whether the run just ended stayed ``running`` for ``seconds`` up to monotonic time ``until``."""
        return self.running_since is not None and until - self.running_since >= seconds

    def seconds_until_stall(self) -> float | None:
        """How long the watchdog may wait before looking again; None when it never needs to."""
        if self.stall_after is None:
            return None
        if self.state in _UNWATCHED:
            return self.stall_after  # look again later: the unit may leave this state
        return max(0.0, self.last_life + self.stall_after - time.monotonic())

    def is_stalled(self) -> bool:
        return (
            self.stall_after is not None
            and self.state not in _UNWATCHED
            and time.monotonic() - self.last_life >= self.stall_after
        )

    def health(self) -> Health:
        return Health(
            state=self.state,
            reason=self.reason,
            since=self.since,
            restarts=max(0, self.runs - 1),
            last_event_at=self.last_event_at,
            last_heartbeat_at=self.last_heartbeat_at,
            next_restart_at=self.next_restart_at,
        )


class Heartbeat:
    """What a unit is handed to show it is alive and to say how it is doing.

    It belongs to one run: once that run has ended (crashed, stalled, been
    restarted) its calls are ignored, so a leftover task of an old run cannot
    report a new run healthy.  Call it from the event loop's thread.
    """

    __slots__ = ("_generation", "_unit")

    def __init__(self, unit: _Unit, generation: int) -> None:
        self._unit, self._generation = unit, generation

    def beat(self) -> None:
        """The transport showed life: a poll returned, a frame or a ping arrived."""
        if self._is_current():
            self._unit.touch()

    def event(self) -> None:
        """An event was received (also a sign of life)."""
        if self._is_current():
            self._unit.touch()
            self._unit.last_event_at = self._unit.last_heartbeat_at

    def set_state(self, state: ChannelState, reason: str | None = None) -> None:
        """Report the unit's state, e.g. ``RUNNING`` once connected or ``ACTION_REQUIRED, "scan the QR code"``."""
        if self._is_current():
            self._unit.touch()
            self._unit.set_state(state, reason)

    def _is_current(self) -> bool:
        return self._unit.generation == self._generation


UnitFactory = Callable[[Heartbeat], Awaitable[None]]


class _RunEnded(Exception):
    """Why the supervisor itself ended a run; its text is written to be shown."""


class _Stalled(_RunEnded):
    pass


class Supervisor:
    """Runs named units, restarts them by the rules above, and reports their health.

    ``sleep`` waits out restart backoff; tests pass one that records the
    delays instead of waiting.  ``cancel_grace`` bounds how long a cancelled
    unit may take to clean up before it is abandoned.
    """

    def __init__(
        self,
        *,
        backoff: Backoff | None = None,
        cancel_grace: float = 5.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._backoff = backoff or Backoff()
        self._cancel_grace = cancel_grace
        self._sleep = sleep
        self._units: dict[str, _Unit] = {}
        self._closed = False

    def start(self, name: str, factory: UnitFactory, *, stall_after: float | None = None,
              stopped: str | None = None) -> None:
        """Run ``factory(heartbeat)`` under supervision.

        ``stall_after``: seconds without a sign of life after which the unit is
        restarted; None for units that may legitimately stay silent.
        ``stopped``: register the unit without running it, ``stopped`` for this
        reason, until :meth:`restart` (a channel account an operator disabled).
        """
        if self._closed:
            raise RuntimeError("the supervisor has been stopped")
        if name in self._units:
            raise ValueError(f"unit {name!r} is already supervised")
        if stall_after is not None and stall_after <= 0:
            raise ValueError(f"stall_after must be positive, got {stall_after}")
        unit = self._units[name] = _Unit(name=name, factory=factory, stall_after=stall_after)
        if stopped is not None:
            unit.set_state(ChannelState.STOPPED, stopped)
            return
        unit.runner = asyncio.create_task(self._supervise(unit), name=f"supervise:{name}")

    async def halt(self, name: str, reason: str) -> None:
        """Stop one unit and keep it ``stopped`` with ``reason`` until :meth:`restart`.

        Its run is cancelled and awaited (within ``cancel_grace``), a pending
        backoff sleep ends, and heartbeats of the old run are ignored from now
        on, so nothing reports it alive again."""
        unit = self._units.get(name)
        if unit is None:
            raise KeyError(f"no unit named {name!r}")
        if unit.runner is not None and not unit.runner.done():
            unit.runner.cancel()
            await asyncio.wait({unit.runner})
        unit.runner = None
        unit.generation += 1
        unit.next_restart_at = None
        unit.set_state(ChannelState.STOPPED, reason)
        log.info("unit halted unit=%s reason=%r", name, reason)

    async def remove(self, name: str) -> None:
        """Halt one unit and forget it (a channel account deleted in the console); KeyError for an unknown one."""
        await self.halt(name, "removed")
        del self._units[name]

    async def restart(self, name: str) -> None:
        """Start a unit again now, whatever its state, with fresh backoff; the old run ends first."""
        if self._closed:
            raise RuntimeError("the supervisor has been stopped")
        unit = self._units.get(name)
        if unit is None:
            raise KeyError(f"no unit named {name!r}")
        if unit.runner is not None and not unit.runner.done():
            unit.runner.cancel()
            await asyncio.wait({unit.runner})
        unit.failures = 0
        unit.next_restart_at = None
        log.info("unit restart requested unit=%s", name)
        unit.runner = asyncio.create_task(self._supervise(unit), name=f"supervise:{name}")

    def note_event(self, name: str) -> None:
        """An event for this unit became durable (called by the pipeline, not the unit itself)."""
        unit = self._units.get(name)
        if unit is not None:
            unit.touch()
            unit.last_event_at = unit.last_heartbeat_at

    def health(self) -> dict[str, Health]:
        return {name: unit.health() for name, unit in self._units.items()}

    async def stop(self, drain: Callable[[], Awaitable[None]] | None = None, timeout: float = 10.0) -> bool:
        """Cancel every unit, then await ``drain`` (finish in-flight sends), all within ``timeout``.

        Units go first so no new inbound work arrives while accepted work
        drains.  Returns True when everything ended in time.
        """
        self._closed = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        runners = {u.runner: u.name for u in self._units.values() if u.runner is not None and not u.runner.done()}
        for runner in runners:
            runner.cancel()
        clean = True
        if runners:
            _, pending = await asyncio.wait(runners, timeout=timeout)
            if pending:
                clean = False
                late = ",".join(sorted(runners[t] for t in pending))
                log.error("units did not stop in time units=%s timeout=%gs", late, timeout)
        for unit in self._units.values():
            unit.generation += 1
            unit.next_restart_at = None
            unit.set_state(ChannelState.STOPPED, "shutdown")
        if drain is not None:
            clean = await _drain(drain, max(0.0, deadline - loop.time())) and clean
        log.info("supervisor stopped clean=%s", clean)
        return clean

    async def _supervise(self, unit: _Unit) -> None:
        while True:
            error = await self._run_once(unit)
            if error is None:
                unit.set_state(ChannelState.STOPPED, "exited")
                log.warning("unit exited unit=%s", unit.name)
                return
            reason = _describe(error)
            if isinstance(error, _NEEDS_HUMAN):
                unit.set_state(ChannelState.ACTION_REQUIRED, reason)
                log.warning("unit needs action unit=%s reason=%r", unit.name, reason)
                return
            # A stalled run was healthy only until its last sign of life, not until the watchdog noticed.
            healthy_until = unit.last_life if isinstance(error, _Stalled) else time.monotonic()
            if unit.ran_healthy_for(self._backoff.reset_after, until=healthy_until):
                unit.failures = 0
            unit.failures += 1
            delay = self._backoff.delay(unit.failures)
            unit.set_state(ChannelState.ERROR, reason)
            unit.next_restart_at = _utcnow() + timedelta(seconds=delay)
            log.warning("unit failed unit=%s reason=%r failures=%d restart_in=%.2fs", unit.name, reason, unit.failures, delay)
            if not isinstance(error, (GatewayError, _RunEnded)):
                log.debug("unit traceback unit=%s", unit.name, exc_info=error)  # may quote secrets: DEBUG only
            try:
                await self._sleep(delay)
            finally:
                unit.next_restart_at = None

    async def _run_once(self, unit: _Unit) -> Exception | None:
        """One run of the unit; returns why it ended, or None when it returned on its own."""
        unit.begin_run()
        task = asyncio.create_task(_call(unit.factory, Heartbeat(unit, unit.generation)), name=f"unit:{unit.name}")
        try:
            stalled = await self._watch(unit, task)
        except asyncio.CancelledError:
            await self._cancel(unit, task)
            raise
        finally:
            unit.generation += 1
        if stalled:
            return _Stalled(f"stalled: no sign of life for {unit.stall_after:g} s")
        if task.cancelled():
            return _RunEnded("cancelled outside the supervisor")
        error = task.exception()
        if error is not None and not isinstance(error, Exception):
            raise error  # KeyboardInterrupt, SystemExit: not ours to absorb
        return error

    async def _watch(self, unit: _Unit, task: asyncio.Task[None]) -> bool:
        """Wait for the run to end; True when the watchdog ended it for silence."""
        while True:
            done, _ = await asyncio.wait({task}, timeout=unit.seconds_until_stall())
            if done:
                return False
            if unit.is_stalled():
                log.warning("unit stalled unit=%s stall_after=%gs", unit.name, unit.stall_after)
                await self._cancel(unit, task)
                return True

    async def _cancel(self, unit: _Unit, task: asyncio.Task[None]) -> None:
        task.cancel()
        task.add_done_callback(_collect)
        done, _ = await asyncio.wait({task}, timeout=self._cancel_grace)
        if not done:
            log.error("unit ignored cancellation unit=%s grace=%gs; abandoning that run", unit.name, self._cancel_grace)


async def _call(factory: UnitFactory, heartbeat: Heartbeat) -> None:
    await factory(heartbeat)


def _collect(task: asyncio.Task[None]) -> None:
    """Retrieve a cancelled run's outcome (an error raised while it cleaned up) so asyncio does not warn about it."""
    if not task.cancelled():
        task.exception()


async def _drain(drain: Callable[[], Awaitable[None]], timeout: float) -> bool:
    try:
        await asyncio.wait_for(drain(), timeout)
    except TimeoutError:
        log.error("drain timed out timeout=%gs", timeout)
        return False
    except Exception:
        log.exception("drain failed")
        return False
    return True


def _describe(error: Exception) -> str:
    """A reason fit for the status page and the logs.

    Gateway errors are written to be shown: each channel's transport words a
    failed connection there, naming its endpoint and the fix.  Any other
    exception is a bug whose text we did not write: URLs in it may carry tokens
    (Telegram puts the bot token in the path), so each is cut to its scheme and
    host, and a failed connection among its causes is said in plain words first.
    """
    if isinstance(error, (GatewayError, _RunEnded)):
        text = str(error)
    elif (why := why_unreachable(error)) is not None:  # a transport that did not word it: say what happened
        detail = _URL.sub(lambda m: f"{m['scheme']}{m['host']}/…", str(error))
        text = f"a connection failed ({why}): {detail}" if detail else f"a connection failed ({why})"
    else:
        detail = _URL.sub(lambda m: f"{m['scheme']}{m['host']}/…", str(error))
        text = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
    return text[:_MAX_REASON]
