"""A served gateway whose learners talk on the relay platform emulator, for the conversations and pairing areas.

Two partners share one relay bot: ``algebra`` (Ada's) answers the whole account, ``biology`` (Ben's)
answers the one direct chat ``ben-kid``.  The responder echoes, so a transcript's answer can be told
from its question.  The console users are the rig's (:mod:`tests.console.rig`); learners speak only
through the emulator (``RelayClient.inject``) and what they see is read back from it (``sent``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.console.conversations import ref_of
from gateway.core.events import RuntimeEvent, StreamEnd, TurnEnd
from gateway.core.turns import Turn
from gateway.store.console import Role
from tests.console.rig import ADA_ID, BEN_ID, user
from tests.contract.harness import eventually
from tests.e2e.rig import accepting, served
from tests.peers.relay_platform import RelayClient


class Echo:
    """Answers every turn with what the learner said, marked, so the answer is not the question."""

    name = "echo"

    async def respond(self, turn: Turn) -> AsyncIterator[RuntimeEvent]:
        yield StreamEnd(markdown=f"Echo: {turn.text}")
        yield TurnEnd()


@dataclass
class Classroom:
    url: str
    gateway: Gateway
    relay: RelayClient

    async def say(self, learner: str, text: str) -> None:
        await self.relay.inject(learner, learner, text)

    async def seen_by(self, learner: str) -> list[str]:
        return [m["text"] for m in (await self.relay.sent()).get(learner, [])]

    async def sees(self, learner: str, text: str, *, what: str = "") -> list[str]:
        async def check() -> list[str] | None:
            seen = await self.seen_by(learner)
            return seen if text in seen else None
        return await eventually(check, what=what or f"{learner} to see {text!r}")


def ref(learner: str) -> str:
    """The console's reference of a learner's direct chat with the relay bot."""
    return ref_of(f"relay:main:{learner}")


@contextlib.asynccontextmanager
async def classroom(relay_peer: Any, data_dir: Any, monkeypatch: pytest.MonkeyPatch, *, dm: str = "open") -> AsyncIterator[Classroom]:
    token = f"tok-{uuid.uuid4().hex}"
    variable = f"RELAY_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    monkeypatch.setenv(variable, token)
    await accepting(relay_peer.url)
    relay = RelayClient(relay_peer.url, token)
    await relay.register()
    ada = {"channel": "telegram", "user": "100"}
    config = parse_config({
        "data_dir": str(data_dir),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [
            {"id": "algebra", "name": "Algebra", "owners": [ada]},
            {"id": "biology", "name": "Biology", "owners": [{"channel": "matrix", "user": "@ben:school.example"}]},
        ],
        "bindings": [{"partner": "algebra", "channel": "relay", "account": "main"},
                     {"partner": "biology", "channel": "relay", "account": "main", "chat": "ben-kid"}],
        "channels": {"relay": {"main": {"base_url": relay_peer.url, "token": f"env:{variable}", "poll_timeout": 2,
                                        "access": {"dm": dm}}}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
    })
    try:
        async with Gateway(config, responder=Echo()) as gateway, served(gateway) as url:
            assert gateway.channel("relay", "main") is not None, gateway.unavailable
            for made in (user("root", Role.ADMINISTRATOR), user("ada", Role.TEACHER, ADA_ID), user("ben", Role.TEACHER, BEN_ID)):
                assert await gateway.store.add_console_user(made)
            yield Classroom(url, gateway, relay)
    finally:
        await relay.aclose()
