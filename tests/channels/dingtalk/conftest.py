"""A gateway with one DingTalk app on the loopback emulator, answering with the contract responder.

The ticket is got through the real dingtalk-stream SDK (its ``open_connection``, the
endpoint set from the account's ``api_base``); the socket is the kit's session; the
gateway is the real one on the durable SQLite path.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from tests.channels.rigs import Answers, one_account
from tests.contract.harness import ContractResponder
from tests.e2e.rig import served
from tests.extras import need_module
from tests.peers.dingtalk_server import DingtalkServer, Shown


def account_settings(server: DingtalkServer, env: str, **settings: Any) -> dict[str, Any]:
    return {"client_id": server.client_id, "client_secret": f"env:{env}", "api_base": server.url,
            "access": {"dm": "open", "group": "mention"}, **settings}


def config(data_dir: Path, server: DingtalkServer, env: str, **settings: Any) -> Any:
    return one_account(data_dir, "dingtalk", "school", account_settings(server, env, **settings))


@dataclass
class DingtalkRig(Answers[Shown]):
    server: DingtalkServer
    gateway: Gateway
    responder: ContractResponder

    def seen(self, chat: str) -> list[Shown]:
        return self.server.answers(chat)


RigFactory = Callable[..., Any]


@pytest.fixture
async def dingtalk_rig(tmp_path) -> AsyncIterator[RigFactory]:
    """``await dingtalk_rig(**settings)``: a started gateway on a fresh emulator; stopped after the test.
    With ``mode="http"`` the gateway is served on loopback and the emulator posts to its webhook."""
    need_module("dingtalk_stream")
    env = f"DINGTALK_SECRET_{uuid.uuid4().hex[:8].upper()}"
    opened: list[tuple[DingtalkServer, Gateway]] = []
    serving = contextlib.AsyncExitStack()

    async def make(**settings: Any) -> DingtalkRig:
        server = await DingtalkServer(secret=uuid.uuid4().hex).__aenter__()
        os.environ[env] = server.secret
        responder = ContractResponder()
        gateway = Gateway(config(tmp_path / f"data{len(opened)}", server, env, **settings), responder=responder)
        await gateway.start()
        opened.append((server, gateway))
        assert gateway.channel("dingtalk", "school") is not None, gateway.unavailable
        if settings.get("mode") == "http":
            url = await serving.enter_async_context(served(gateway))
            server.callback_url = f"{url}/webhooks/dingtalk/school"
        else:
            await server.connected()
        return DingtalkRig(server, gateway, responder)

    try:
        yield make
    finally:
        await serving.aclose()
        for server, gateway in opened:
            await gateway.stop()
            await server.__aexit__(None, None, None)
        os.environ.pop(env, None)
