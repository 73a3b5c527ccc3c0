"""A sink, cursor store and heartbeat that record nothing: for driving a channel without a gateway."""

from __future__ import annotations

from collections.abc import Sequence

from gateway.core.channel import ChannelState
from gateway.core.messages import InboundMessage


class Inert:
    def __init__(self) -> None:
        self.accepted: list[InboundMessage] = []
        self.invalids: list[str] = []
        self.cursors: dict[str, str] = {}

    async def accept(self, messages: Sequence[InboundMessage]) -> None:
        self.accepted.extend(messages)

    def invalid(self, reason: str) -> None:
        self.invalids.append(reason)

    def refused(self, rule: str, detail: str) -> None: ...

    def late_ack(self, took_s: float, deadline_s: float) -> None: ...

    async def get(self, key: str) -> str | None:
        return self.cursors.get(key)

    async def put(self, key: str, value: str) -> None:
        self.cursors[key] = value

    def beat(self) -> None: ...

    def event(self) -> None: ...

    def set_state(self, state: ChannelState, reason: str | None = None) -> None: ...
