"""A gateway with one WeCom AI bot on the loopback emulator, answering with the contract responder.

The SDK is the real wecom-aibot-sdk, dialling the emulator over a socket; the
gateway is the real one on the durable SQLite path.  A test that needs the SDK
takes ``rig`` (skipped without it); the self-built app's tests need none.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from tests.channels.rigs import Answers, one_account
from tests.contract.harness import ContractResponder
from tests.extras import need_module
from tests.peers.wecom_server import StreamSeen, WecomServer


def account_settings(server: WecomServer, env: str, **settings: Any) -> dict[str, Any]:
    return {"mode": {"kind": "ai_bot", "bot_id": server.bot_id, "secret": f"env:{env}", "ws_url": server.url},
            "access": {"dm": "open", "group": "mention"}, **settings}


def config(data_dir: Path, server: WecomServer, env: str, **settings: Any) -> Any:
    return one_account(data_dir, "wecom", "school", account_settings(server, env, **settings))


@dataclass
class WecomRig(Answers[StreamSeen]):
    server: WecomServer
    gateway: Gateway
    responder: ContractResponder

    def seen(self, chat: str) -> list[StreamSeen]:
        return self.server.answers(chat)


@contextlib.asynccontextmanager
async def running(tmp_path: Path, server: WecomServer, **settings: Any) -> AsyncIterator[WecomRig]:
    """A gateway with one AI-bot account (``settings`` added to it) on ``server``, which is serving."""
    need_module("wecom_aibot_sdk")  # the AI bot's tests only: the self-built app's run without the SDK
    env = f"WECOM_SECRET_{uuid.uuid4().hex[:8].upper()}"
    os.environ[env] = server.secret
    responder = ContractResponder()
    gateway = Gateway(config(tmp_path / "data", server, env, **settings), responder=responder)
    await gateway.start()
    try:
        assert gateway.channel("wecom", "school") is not None, gateway.unavailable
        await server.connected()
        yield WecomRig(server, gateway, responder)
    finally:
        await gateway.stop()
        os.environ.pop(env, None)


@pytest.fixture
async def rig(tmp_path) -> AsyncIterator[WecomRig]:
    async with WecomServer() as server, running(tmp_path, server) as made:
        yield made


from tests.channels.wecom.app_rig import app_rig  # noqa: E402,F401 -- the self-built app rig, for its tests
