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
from tests.channels.rigs import Answers, one_account
from tests.contract.harness import ContractResponder
from tests.extras import need_module

need_module("websockets")

from tests.peers.mattermost_server import MattermostServer, Post  # noqa: E402 -- after the SDK check above


def account_settings(server: MattermostServer, env: str, **settings: Any) -> dict[str, Any]:
    return {"url": server.url, "token": f"env:{env}", "access": {"dm": "open", "group": "mention"}, **settings}


def config(data_dir: Path, server: MattermostServer, env: str, **settings: Any) -> Any:
    return one_account(data_dir, "mattermost", "school", account_settings(server, env, **settings))


@dataclass
class MattermostRig(Answers[Post]):
    server: MattermostServer
    gateway: Gateway
    responder: ContractResponder

    def seen(self, chat: str) -> list[Post]:
        return self.server.shown(chat)


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
