"""A gateway with one Discord account on its own Gateway + REST emulator, and the users who talk to it.

Every rig starts its own emulator (in the test's event loop, on a free loopback
port) and a real gateway on the durable SQLite path, answering with the
contract suite's :class:`ContractResponder`; discord.py reaches the emulator
over sockets through the account's ``api_base`` and ``gateway_url``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.discord_harness import DiscordHarness, seen_from
from tests.contract.harness import ContractResponder, Seen, counter, eventually, settled
from tests.peers.discord_server import DiscordPeer


@dataclass
class DiscordRig:
    harness: DiscordHarness
    gateway: Gateway
    responder: ContractResponder
    data_dir: Path

    @property
    def peer(self) -> DiscordPeer:
        return self.harness.peer

    @property
    def channel(self) -> Any:
        return self.gateway.channel("discord", "main")

    async def replies(self, chat: str, count: int, *, what: str = "replies") -> list[Seen]:
        def enough() -> list[Seen] | None:
            shown = [seen_from(m) for m in self.peer.seen(chat)]
            return shown if len(shown) >= count else None

        return await eventually(enough, what=f"{count} {what} in channel {chat}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")

    def metric(self, name: str, **labels: str) -> float:
        return counter(self.gateway, name, channel="discord", **labels)

    async def account(self) -> Any:
        [account] = (await self.gateway.status()).accounts
        return account


@pytest.fixture
async def open_rig(tmp_path) -> AsyncIterator[Callable[..., Awaitable[DiscordRig]]]:
    """``await open_rig(peer={...emulator options}, connect=True, **account_settings)``."""
    async with contextlib.AsyncExitStack() as stack:

        async def open_(*, peer: dict | None = None, connect: bool = True, responder: ContractResponder | None = None,
                        **settings: Any) -> DiscordRig:
            harness = DiscordHarness(**(peer or {}))
            await harness.start(tmp_path)
            stack.push_async_callback(harness.stop)
            data_dir = tmp_path / "data"
            responder = responder or ContractResponder()
            gateway = Gateway(parse_config(harness.raw_config(data_dir, **settings)), responder=responder)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            assert gateway.channel("discord", "main") is not None, gateway.unavailable
            if connect:
                await harness.attach(gateway)
            return DiscordRig(harness, gateway, responder, data_dir)

        yield open_

