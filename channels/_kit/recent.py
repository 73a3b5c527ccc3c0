"""A bounded memory of recent answers, each kept for a while: what a channel looked up and may look up again.

Slack sends no locale with its events, so the channel asks ``users.info`` -- once per learner per
while, not once per message.  :class:`Recent` holds those answers: at most ``size`` of them (the
least recently used goes first), each for ``ttl_s`` seconds on the monotonic clock, so a learner who
changes their language is read again within the hour and a workspace of thousands costs a bounded
amount of memory.  The numbers are the channel's settings, handed in.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Recent(Generic[K, V]):
    """At most ``size`` values, each forgotten ``ttl_s`` seconds after it was put."""

    def __init__(self, *, size: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if size < 1 or ttl_s <= 0:
            raise ValueError("a Recent needs a size of at least 1 and a positive ttl_s")
        self.size, self.ttl_s, self._clock = size, ttl_s, clock
        self._values: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value put for ``key`` less than ``ttl_s`` ago, or None."""
        found = self._values.get(key)
        if found is None:
            return None
        if self._clock() >= found[0]:
            del self._values[key]
            return None
        self._values.move_to_end(key)
        return found[1]

    def put(self, key: K, value: V) -> None:
        self._values[key] = (self._clock() + self.ttl_s, value)
        self._values.move_to_end(key)
        while len(self._values) > self.size:
            self._values.popitem(last=False)

    def __len__(self) -> int:
        return len(self._values)
