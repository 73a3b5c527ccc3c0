from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.events import StreamDelta, StreamEnd, TurnEnd
from gateway.core.turns import Turn
from tests.pipeline.memory_channel import DEFAULT_CAPS, MemoryChannel


def make_config(tmp_path, *, access=None, pipeline=None, partner=None):
    raw = {
        "data_dir": str(tmp_path),
        "partners": [{"id": "tutor", "name": "Tutor", **(partner or {})}],
        "bindings": [{"partner": "tutor", "channel": "memory", "account": "acct"}],
        "channels": {"memory": {"acct": {"access": access or {"dm": "open"}}}},
        "pipeline": {"coalesce_window_s": 0, **(pipeline or {})},
    }
    return parse_config(raw)


class ScriptedResponder:
    """Answers with a function of the turn; optional per-delta delay and a gate to hold turns."""

    name = "scripted"

    def __init__(self, answer=lambda turn: "re: " + " | ".join(m.text for m in turn.messages), *, chunks=0, delay=0.0):
        """``chunks`` > 0 streams the answer as that many deltas (previews); 0 sends only the final text."""
        self.answer = answer
        self.chunks = chunks
        self.delay = delay
        self.turns: list[Turn] = []
        self.gate: asyncio.Event | None = None

    async def respond(self, turn: Turn) -> AsyncIterator:
        self.turns.append(turn)
        if self.gate is not None:
            await self.gate.wait()
        text = self.answer(turn)
        step = max(1, len(text) // self.chunks) if self.chunks else len(text) + 1
        for i in range(0, len(text) if self.chunks else 0, step):
            yield StreamDelta(text=text[i:i + step])
            if self.delay:
                await asyncio.sleep(self.delay)
        yield StreamEnd(markdown=text)
        yield TurnEnd()


@pytest.fixture(autouse=True)
def _reset_memory_channel():
    MemoryChannel.instances.clear()
    MemoryChannel.caps = DEFAULT_CAPS
    yield
    MemoryChannel.caps = DEFAULT_CAPS


@pytest.fixture
async def start_gateway(tmp_path):
    running: list[Gateway] = []

    async def start(responder=None, **config_kw) -> tuple[Gateway, MemoryChannel]:
        gateway = Gateway(make_config(tmp_path, **config_kw), responder=responder or ScriptedResponder(),
                          channel_classes={"memory": MemoryChannel})
        await gateway.start()
        running.append(gateway)
        return gateway, gateway.channel("memory", "acct")

    yield start
    for gateway in running:
        if gateway.ready:
            await gateway.stop()
