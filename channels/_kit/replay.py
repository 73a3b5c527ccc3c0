"""A bounded memory of the signatures (or event ids) a webhook verifier has already let through.

A signed request captured on the wire verifies again for as long as its
timestamp is inside the window; remembering what passed closes that gap.  The
memory only has to outlive the window -- an older request is refused as stale
anyway -- so entries expire after ``window_s`` and the oldest go first once
``capacity`` is reached: a flood of valid requests cannot grow it without bound.

A verifier *claims* a key as it verifies; the caller *releases* it when the
request could not be made durable, so the platform's own retry of that very
request is not refused as a replay and the message is not lost.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from gateway.core.capabilities import capabilities_of
from gateway.core.errors import ForgedRequest


class ReplayMemory:
    """Keys seen in the last ``window_s`` seconds, at most ``capacity`` of them."""

    def __init__(self, window_s: float, *, capacity: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        if window_s <= 0 or capacity < 1:
            raise ValueError("a replay memory needs a positive window and room for one key")
        self.window_s, self.capacity, self._clock = window_s, capacity, clock
        self._seen: OrderedDict[str, float] = OrderedDict()

    @classmethod
    def for_platform(cls, platform: str, *, capacity: int = 10_000, clock: Callable[[], float] = time.monotonic) -> ReplayMemory:
        """A memory as long as ``platform``'s declared ``signature_window_s`` (what the verifier is handed too)."""
        window = capabilities_of(platform).signature_window_s
        if window is None:
            raise ValueError(f"{platform} declares no signature_window_s in channels/platforms.toml: "
                             "its requests carry no timestamp to bound a replay memory by")
        return cls(window, capacity=capacity, clock=clock)

    def __len__(self) -> int:
        self._expire(self._clock())
        return len(self._seen)

    def claim(self, key: str) -> None:
        """Remember ``key``; raise ``ForgedRequest(reason="replayed")`` if it is already remembered."""
        now = self._clock()
        self._expire(now)
        if key in self._seen:
            raise ForgedRequest("this signature was already used", reason="replayed")
        self._seen[key] = now
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)

    def release(self, key: str) -> None:
        """Forget ``key``: the request it came with was not made durable and may come again."""
        self._seen.pop(key, None)

    def _expire(self, now: float) -> None:
        while self._seen:
            key, at = next(iter(self._seen.items()))
            if now - at < self.window_s:
                return
            del self._seen[key]
