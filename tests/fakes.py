"""Small real objects that stand in for the pipeline around a channel under test.

A channel is handed a sink, cursors and a heartbeat; these record what the
channel did with them, so channel tests assert on behaviour, not on mocks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from gateway.core.messages import InboundMessage


class RecordingSink:
    """Deduplicates on the event key like the real pipeline.

    ``gate`` holds ``accept`` open (to prove a channel waits for durability);
    ``failures`` makes the next calls raise as a full disk would.
    """

    def __init__(self) -> None:
        self.accepted: list[InboundMessage] = []
        self.invalid_reasons: list[str] = []
        self.undelivered_reasons: list[str] = []
        self.refusals: list[tuple[str, str]] = []
        self.late_acks: list[tuple[float, float]] = []
        self.calls = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.failures = 0

    async def accept(self, messages: Sequence[InboundMessage]) -> None:
        self.calls += 1
        await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise OSError("disk full at /var/lib/partners")
        known = {m.dedup_key for m in self.accepted}
        self.accepted.extend(m for m in messages if m.dedup_key not in known)

    def invalid(self, reason: str) -> None:
        self.invalid_reasons.append(reason)

    def refused(self, rule: str, detail: str) -> None:
        self.refusals.append((rule, detail))

    def late_ack(self, took_s: float, deadline_s: float) -> None:
        self.late_acks.append((took_s, deadline_s))

    async def undelivered(self, target: object, reason: str) -> None:
        self.undelivered_reasons.append(reason)


class MemoryCursors:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def get(self, name: str) -> str | None:
        return self.values.get(name)

    async def put(self, name: str, value: str, *, keep_s: float | None = None) -> None:
        self.values[name] = value


class RecordingHeartbeat:
    def __init__(self) -> None:
        self.beats = self.events = 0
        self.states: list[object] = []

    def beat(self) -> None:
        self.beats += 1

    def event(self) -> None:
        self.events += 1

    def set_state(self, state: object, reason: str | None = None) -> None:
        self.states.append(state)
