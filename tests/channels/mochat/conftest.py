"""A gateway with one Mochat agent on the loopback emulator, answering with the contract responder.

python-socketio runs for real (msgpack) against the emulator's AsyncServer, and
the REST calls go over httpx to the same aiohttp app; the gateway is the real
one on the durable SQLite path.  The fallback's waits are shortened so a test
sees the socket tried again within a second or two.
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

need_module("socketio")  # before the emulator, which imports them: a missing SDK fails, never skips
need_module("msgpack")

from tests.peers.mochat_server import MochatServer, Sent  # noqa: E402 -- after the SDK check above

SESSIONS = ("s-learner1", "s-learner2")
PANELS = ("p-class1",)


def account_settings(server: MochatServer, env: str, **settings: Any) -> dict[str, Any]:
    return {"base_url": server.url, "claw_token": f"env:{env}", "agent_user_id": server.agent,
            "sessions": list(SESSIONS), "panels": list(PANELS),
            "watch_timeout_s": 1.0, "socket_retry_max_s": 1.0, "panel_poll_s": 0.2, "connect_timeout_s": 3.0,
            "access": {"dm": "open", "group": "mention"}, **settings}


def config(data_dir: Path, server: MochatServer, env: str, **settings: Any) -> Any:
    return one_account(data_dir, "mochat", "school", account_settings(server, env, **settings))


@dataclass
class MochatRig(Answers[Sent]):
    server: MochatServer
    gateway: Gateway
    responder: ContractResponder

    def seen(self, chat: str) -> list[Sent]:
        return self.server.shown(chat)

    async def account(self) -> Any:
        [account] = (await self.gateway.status()).accounts
        return account


@pytest.fixture
async def open_rig(tmp_path) -> AsyncIterator[Callable[..., Awaitable[MochatRig]]]:
    """``await open_rig(token=..., socket_down=False, connect=True, **account_settings)``."""
    env = f"MOCHAT_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    gateways: list[Gateway] = []
    async with MochatServer() as server:

        async def start(*, token: str | None = None, socket_down: bool = False, connect: bool = True,
                        **settings: Any) -> MochatRig:
            os.environ[env] = token or server.token
            server.socket_down = socket_down
            responder = ContractResponder()
            gateway = Gateway(config(tmp_path / "data", server, env, **settings), responder=responder)
            gateways.append(gateway)
            await gateway.start()
            assert gateway.channel("mochat", "school") is not None, gateway.unavailable
            if connect and not socket_down:
                await server.connected()
            return MochatRig(server, gateway, responder)

        try:
            yield start
        finally:
            for gateway in gateways:
                await gateway.stop()
            os.environ.pop(env, None)


@pytest.fixture
async def rig(open_rig) -> MochatRig:
    return await open_rig()
