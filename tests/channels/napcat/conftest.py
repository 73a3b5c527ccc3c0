"""A gateway with one NapCat account on the loopback OneBot emulator, answering with the contract responder."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from tests.channels.rigs import one_account
from tests.contract.harness import ContractResponder, eventually, settled
from tests.peers.napcat_server import NapcatServer, Shown


def account_settings(server: NapcatServer, env: str, **settings: Any) -> dict[str, Any]:
    return {"i_understand_the_ban_risk": True, "ws_url": server.url, "access_token": f"env:{env}",
            "self_id": str(server.self_id), "access": {"dm": "open", "group": "mention"}, **settings}


def config(data_dir: Path, settings: dict[str, Any], **top: Any) -> Any:
    return one_account(data_dir, "napcat", "qq", settings, **top)


@dataclass
class NapcatRig:
    server: NapcatServer
    gateway: Gateway
    responder: ContractResponder

    async def shown(self, chat: str, count: int) -> list[Shown]:
        async def enough() -> list[Shown] | None:
            shown = self.server.shown(chat)
            return shown if len(shown) >= count and settled(self.gateway) else None

        return await eventually(enough, what=f"{count} messages in {chat}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")


@pytest.fixture
def token_env() -> AsyncIterator[str]:
    env = f"NAPCAT_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    yield env
    os.environ.pop(env, None)


@pytest.fixture
async def rig(tmp_path, token_env) -> AsyncIterator[NapcatRig]:
    async with NapcatServer(token=uuid.uuid4().hex, heartbeat_ms=200) as server:
        os.environ[token_env] = server.token
        responder = ContractResponder()
        gateway = Gateway(config(tmp_path / "data", account_settings(server, token_env)), responder=responder)
        await gateway.start()
        try:
            assert gateway.channel("napcat", "qq") is not None, gateway.unavailable
            await server.connected()
            yield NapcatRig(server, gateway, responder)
        finally:
            await gateway.stop()
