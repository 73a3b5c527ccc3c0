"""A node's leases kept alive: taken when free, renewed in one statement, and let go *before* they expire.

The keeper is told which resources this node wants (every account in its config) and calls back when
it gains or loses one.  It never trusts a lease longer than it can prove: a renewal that started at
local monotonic time ``t`` and succeeded makes the lease good until ``t + lease_s - fence_margin_s``
-- the database's expiry less a margin, counted from *before* the round trip, so a slow answer only
shortens it.  When that time passes without a newer renewal (the database is gone, the node was
paused), ``on_lost`` runs and the work stops, before any other node may take the resource.

The timings (ADR 0051) are :class:`gateway.core.config.FleetConfig`'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from gateway.core.config import lease_timings_problem
from gateway.fleet.leases import Grant, Leases

log = logging.getLogger(__name__)

OnGained = Callable[[Grant], Awaitable[None]]
OnLost = Callable[[str], Awaitable[None]]


class LeaseKeeper:
    def __init__(self, leases: Leases, *, lease_s: float, renew_every_s: float, look_every_s: float,
                 fence_margin_s: float, on_gained: OnGained, on_lost: OnLost,
                 clock: Callable[[], float] = time.monotonic) -> None:
        problem = lease_timings_problem(lease_s, renew_every_s, fence_margin_s)
        if problem is not None:
            raise ValueError(f"lease timings: {problem}")
        self.leases = leases
        self.lease_s, self.renew_every_s, self.look_every_s = lease_s, renew_every_s, look_every_s
        self.fence_margin_s = fence_margin_s
        self.on_gained, self.on_lost = on_gained, on_lost
        self.clock = clock
        self._wanted: set[str] = set()
        self._held: dict[str, tuple[Grant, float]] = {}
        """resource -> (its grant, local time until which this node may act on it)."""

    def want(self, resources: Iterable[str]) -> None:
        """The resources this node should run when it can have them (replaces the previous set)."""
        self._wanted = set(resources)

    def held(self) -> dict[str, Grant]:
        """What this node holds and may act on now."""
        now = self.clock()
        return {r: g for r, (g, good_until) in self._held.items() if good_until > now}

    async def run(self) -> None:
        """Renew, fence and look for free resources until cancelled; :meth:`stop` releases cleanly."""
        next_look = 0.0
        while True:
            await self._renew()
            await self._fence()
            if self.clock() >= next_look:
                await self._look()
                next_look = self.clock() + self.look_every_s
            await asyncio.sleep(min(self.renew_every_s, self.look_every_s, self.fence_margin_s / 2))

    async def stop(self) -> None:
        """A clean stop: stop the work of every held resource, then release the leases at once."""
        held = list(self._held)
        for resource in held:
            await self._lose(resource)
        try:
            await self.leases.release(held)
        except Exception as error:  # the leases simply expire
            log.warning("could not release %d leases (they expire by themselves): %s", len(held), error)

    async def _renew(self) -> None:
        due = [r for r, (_, good_until) in self._held.items()
               if good_until - self.clock() < self.lease_s - self.fence_margin_s - self.renew_every_s]
        if not due:
            return
        started = self.clock()
        try:
            kept = await self.leases.renew(due)
        except Exception as error:
            log.warning("lease renewal failed (%d leases; fenced off when they run out): %s", len(due), error)
            return
        good_until = started + self.lease_s - self.fence_margin_s
        kept_names = set()
        for grant in kept:
            kept_names.add(grant.resource)
            self._held[grant.resource] = (grant, good_until)
        for resource in due:
            if resource not in kept_names:
                log.warning("lease on %s was taken by another node", resource)
                await self._lose(resource)

    async def _fence(self) -> None:
        now = self.clock()
        for resource, (_, good_until) in list(self._held.items()):
            if good_until <= now:
                log.warning("lease on %s not renewed in time: stopping its work before it can pass on", resource)
                await self._lose(resource)

    async def _look(self) -> None:
        for resource in sorted(set(self._held) - self._wanted):
            await self._lose(resource)
            await self.leases.release([resource])
        for resource in sorted(self._wanted - set(self._held)):
            started = self.clock()
            try:
                grant = await self.leases.take(resource)
            except Exception as error:
                log.warning("could not try the lease on %s: %s", resource, error)
                return
            if grant is None:
                continue
            self._held[resource] = (grant, started + self.lease_s - self.fence_margin_s)
            try:
                await self.on_gained(grant)
            except Exception:
                log.exception("starting the work of %s failed; its lease is let go", resource)
                await self._lose(resource)
                await self.leases.release([resource])

    async def _lose(self, resource: str) -> None:
        if self._held.pop(resource, None) is None:
            return
        try:
            await self.on_lost(resource)
        except Exception:
            log.exception("stopping the work of %s failed", resource)
