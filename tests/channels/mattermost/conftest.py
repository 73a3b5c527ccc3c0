"""A gateway with one Mattermost bot on the loopback emulator, answering with the contract responder.

The channel's httpx client and the kit's websocket session (websockets) talk to
the emulator's aiohttp app over a loopback socket; the gateway is the real one
on the durable SQLite path.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import ContractResponder, eventually, settled
from tests.extras import need_module

need_module("websockets")

from tests.peers.mattermost_server import MattermostServer, Post  # noqa: E402 -- after the SDK check above


def account_settings(server: MattermostServer, env: str, **settings: Any) -> dict[str, Any]:
    return {"url": server.url, "token": f"env:{env}", "access": {"dm": "open", "group": "mention"}, **settings}


def config(data_dir: Path, server: MattermostServer, env: str, **settings: Any) -> Any:
    return parse_config({
        "data_dir": str(data_dir),
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "mattermost", "account": "school"}],
        "channels": {"mattermost": {"school": account_settings(server, env, **settings)}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
    })


@dataclass
class MattermostRig:
    server: MattermostServer
    gateway: Gateway
    responder: ContractResponder

    async def answers(self, chat: str, count: int) -> list[Post]:
        async def enough() -> list[Post] | None:
            shown = self.server.shown(chat)
            return shown if len(shown) >= count and settled(self.gateway) else None

        return await eventually(enough, what=f"{count} answers in {chat}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")


@pytest.fixture
async def open_rig(tmp_path) -> AsyncIterator[Callable[..., Awaitable[MattermostRig]]]:
    """``await open_rig(token=..., connect=True, **account_settings)``; a later call is a restart on the same data."""
    env = f"MATTERMOST_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    gateways: list[Gateway] = []
    async with MattermostServer() as server:

        async def start(*, token: str | None = None, connect: bool = True, **settings: Any) -> MattermostRig:
            os.environ[env] = token or server.token
            responder = ContractResponder()
            gateway = Gateway(config(tmp_path / "data", server, env, **settings), responder=responder)
            gateways.append(gateway)
            await gateway.start()
            assert gateway.channel("mattermost", "school") is not None, gateway.unavailable
            if connect:
                await server.connected(len(gateways))
            return MattermostRig(server, gateway, responder)

        try:
            yield start
        finally:
            for gateway in gateways:
                await gateway.stop()
            os.environ.pop(env, None)


@pytest.fixture
async def rig(open_rig) -> MattermostRig:
    return await open_rig()
