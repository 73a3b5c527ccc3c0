"""How a transport waits before it tries the platform again: the one backoff, shared by every loop of the kit.

A long poll or a socket fails for a moment far more often than for good (a
503, a dropped connection, "slow down").  Waiting in place and trying again
keeps the account ``running`` with its cursor and session; giving up at once
would make the supervisor restart the whole channel (log in again, register
commands again) for a blip.  So the kit's loops retry transient failures in
place -- a few times -- and then raise, and the supervisor's restart takes over.

The delays are :class:`gateway.core.retry.RetryPolicy`'s: full jitter below a cap,
and a platform's ``retry_after`` honoured as given.  The kit has no formula of
its own; what it adds is that a long wait stays a sign of life (a ``retry_after``
of two minutes must not look like a stall to the supervisor's watchdog) and that
the account's state says why it waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import RateLimited, TransientError
from gateway.core.retry import RetryPolicy

log = logging.getLogger(__name__)

RECONNECT = RetryPolicy(base_delay=1.0, max_delay=30.0, max_attempts=4)
"""Three waits in place (up to 1, 2 and 4 s) before the supervisor's restart takes over."""

BEAT_EVERY_S = 10.0
"""While waiting, show life this often: well inside the supervisor's 90 s stall watch."""

Sleep = Callable[[float], Awaitable[None]]


class Retries:
    """Consecutive failures of one transport, and the wait each one earns."""

    def __init__(self, heartbeat: Heartbeat, *, policy: RetryPolicy = RECONNECT, sleep: Sleep = asyncio.sleep,
                 what: str = "transport") -> None:
        self.heartbeat, self.policy, self._sleep, self.what = heartbeat, policy, sleep, what
        self.failures = 0

    def succeeded(self) -> None:
        """The platform answered: the next failure starts the count over."""
        if self.failures:
            self.failures = 0
            self.heartbeat.set_state(ChannelState.RUNNING)

    async def pause(self, error: Exception) -> None:
        """Wait before the next try, or raise ``error`` when no retry in place is due.

        Only transient errors wait (a rate limit, an unavailable peer); anything else -- a revoked token, a
        bug -- is the supervisor's to judge at once."""
        if not isinstance(error, TransientError):
            raise error
        self.failures += 1
        delay = self.policy.delay_for(self.failures, error)
        if delay is None:
            raise error
        why = f"{error} (try {self.failures + 1} in {delay:.1f} s)"
        log.info("%s waiting to retry failures=%d delay=%.2fs reason=%s", self.what, self.failures, delay, error)
        if not isinstance(error, RateLimited):  # a rate limit is the platform working as meant: still running
            self.heartbeat.set_state(ChannelState.CONNECTING, why)
        await wait_alive(self.heartbeat, delay, self._sleep)


async def wait_alive(heartbeat: Heartbeat, seconds: float, sleep: Sleep = asyncio.sleep) -> None:
    """Sleep ``seconds``, showing life every :data:`BEAT_EVERY_S`: a deliberate wait is not a stall."""
    left = seconds
    while left > 0:
        step = min(left, BEAT_EVERY_S)
        await sleep(step)
        left -= step
        heartbeat.beat()
