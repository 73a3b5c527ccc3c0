"""A gateway with one Matrix account on the session's Synapse, and the learners who talk to it.

Every rig has its own bot account (through the contract harness, which also
brings the fault proxy and ``seen``), so tests share nothing but the server.
The gateway is the real one on the durable SQLite path, answering with the
contract suite's :class:`ContractResponder`; tests stop and start it on the
same data dir to check what survives a restart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import ContractResponder, eventually, settled
from tests.contract.matrix_harness import MatrixHarness
from tests.peers.matrix_client import MatrixUser


@dataclass
class MatrixRig:
    harness: MatrixHarness
    data_dir: Path
    responder: ContractResponder = field(default_factory=ContractResponder)
    gateway: Gateway | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def bot(self) -> str:
        return self.harness.bot.user_id

    @property
    def channel(self) -> Any:
        assert self.gateway is not None
        return self.gateway.channel("matrix", "main")

    def config(self) -> Any:
        return parse_config(self.harness.raw_config(self.data_dir, **self.settings))

    async def start(self, **settings: Any) -> Gateway:
        self.settings.update(settings)
        self.gateway = Gateway(self.config(), responder=self.responder)
        await self.gateway.start()
        assert self.channel is not None, self.gateway.unavailable
        return self.gateway

    async def stop(self) -> None:
        if self.gateway is not None:
            gateway, self.gateway = self.gateway, None
            await gateway.stop()

    def learner(self, name: str = "learner") -> MatrixUser:
        return self.harness.new_user(name)

    async def dm(self, name: str = "learner") -> tuple[MatrixUser, str]:
        """A learner and a direct room they made with the bot invited."""
        user = self.learner(name)
        room = await user.create_room(invite=[self.bot], direct=True)
        self.harness.owner[room] = user
        return user, room

    async def group(self) -> tuple[MatrixUser, MatrixUser, str]:
        """A learner, a classmate (joined) and the bot (invited) in one room."""
        user, mate = self.learner(), self.learner("classmate")
        room = await user.create_room(invite=[self.bot, mate.user_id], name="Study group")
        await mate.join(room)
        self.harness.owner[room] = user
        return user, mate, room

    async def bot_joined(self, room: str) -> None:
        user = self.harness.owner[room]
        await eventually(lambda: self._has(user, room), what=f"the bot to join {room}")

    async def _has(self, user: MatrixUser, room: str) -> bool:
        return self.bot in await user.joined(room)

    async def replies(self, room: str, count: int) -> list[Any]:
        async def enough():
            seen = await self.harness.seen(room)
            return seen if len(seen) >= count else None

        return await eventually(enough, what=f"{count} replies in {room}")

    async def quiet(self) -> None:
        assert self.gateway is not None
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")


@pytest.fixture
async def matrix(synapse, tmp_path) -> AsyncIterator[MatrixRig]:
    harness = MatrixHarness(synapse)
    await harness.start(tmp_path)
    rig = MatrixRig(harness, tmp_path / "data")
    try:
        yield rig
    finally:
        await rig.stop()
        await harness.stop()
