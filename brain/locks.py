"""Asyncio locks by key, created on first use and dropped when nobody holds or waits for them.

The brain uses them twice: one turn at a time per learner (a person who writes
from two chat apps at once gets their turns in order, so their one history is
never interleaved) and one consolidation at a time per memory scope.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager


class KeyedLocks:
    def __init__(self) -> None:
        self._locks: dict[Hashable, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, key: Hashable, *, timeout: float | None = None) -> AsyncIterator[None]:
        """Hold the lock of ``key``; ``timeout`` (seconds) raises TimeoutError instead of waiting longer."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with asyncio.timeout(timeout):
                await lock.acquire()
            try:
                yield
            finally:
                lock.release()
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def held(self, key: Hashable) -> bool:
        entry = self._locks.get(key)
        return entry is not None and entry[0].locked()

    def __len__(self) -> int:
        return len(self._locks)
