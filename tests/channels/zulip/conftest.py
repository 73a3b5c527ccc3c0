"""A gateway with one Zulip bot on the loopback emulator, answering with the contract responder.

The channel's httpx client registers and long-polls the emulator over a socket;
the gateway is the real one on the durable SQLite path.  Heartbeats come every
half second, so a poll never waits long.
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
from tests.contract.harness import ContractResponder, eventually
from tests.peers.zulip_server import BOT_EMAIL, Sent, ZulipServer


def account_settings(server: ZulipServer, env: str, **settings: Any) -> dict[str, Any]:
    return {"site": server.url, "email": BOT_EMAIL, "api_key": f"env:{env}", "poll_timeout_s": 10.0,
            "access": {"dm": "open", "group": "mention"}, **settings}


def config(data_dir: Path, server: ZulipServer, env: str, **settings: Any) -> Any:
    return one_account(data_dir, "zulip", "school", account_settings(server, env, **settings))


@dataclass
class ZulipRig(Answers[Sent]):
    server: ZulipServer
    gateway: Gateway
    responder: ContractResponder

    def seen(self, chat: str) -> list[Sent]:
        return self.server.shown(chat)


@pytest.fixture
async def open_rig(tmp_path) -> AsyncIterator[Callable[..., Awaitable[ZulipRig]]]:
    """``await open_rig(**account_settings)``: a gateway on the one emulator (a second call: a restart)."""
    env = f"ZULIP_KEY_{uuid.uuid4().hex[:8].upper()}"
    gateways: list[Gateway] = []
    async with ZulipServer(heartbeat_s=0.5) as server:
        os.environ[env] = server.key

        async def start(**settings: Any) -> ZulipRig:
            responder = ContractResponder()
            gateway = Gateway(config(tmp_path / "data", server, env, **settings), responder=responder)
            gateways.append(gateway)
            polls = server.polls
            await gateway.start()
            assert gateway.channel("zulip", "school") is not None, gateway.unavailable
            await eventually(lambda: server.polls > polls, what="the bot to poll its queue")
            return ZulipRig(server, gateway, responder)

        try:
            yield start
        finally:
            for gateway in gateways:
                await gateway.stop()
            os.environ.pop(env, None)


@pytest.fixture
async def rig(open_rig) -> ZulipRig:
    return await open_rig()
