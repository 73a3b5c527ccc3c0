"""A gateway with one Feishu app on the loopback emulator, answering with the contract responder.

``rig(...)`` opens it on the long connection (the real lark-oapi client dialling the emulator) or, with
``inbound="webhook"``, served over HTTP so a test can post events as Feishu does.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import ContractResponder, eventually, settled
from tests.e2e.rig import served
from tests.extras import need_module
from tests.peers.feishu_server import FeishuServer, Shown

ENCRYPT_KEY = "kq7Zr2Xv9PwB4mTn"
VERIFY_TOKEN = "vT3hQ8sLw1cJ6yRd"


def account_settings(server: FeishuServer, env: str, **settings: Any) -> dict[str, Any]:
    return {"app_id": server.app_id, "app_secret": f"env:{env}", "domain": server.url,
            "access": {"dm": "open", "group": "mention"}, **settings}


@dataclass
class FeishuRig:
    server: FeishuServer
    gateway: Gateway
    responder: ContractResponder
    url: str = ""

    async def answers(self, chat: str, count: int, *, finished: bool = True) -> list[Shown]:
        async def enough() -> list[Shown] | None:
            shown = [s for s in self.server.shown(chat) if not finished or self.server.finished(s)]
            return shown if len(shown) >= count and settled(self.gateway) else None

        return await eventually(enough, what=f"{count} answers in {chat}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")

    def inbound_rows(self) -> int:
        with closing(sqlite3.connect(self.gateway.config.database_path)) as db:
            return db.execute("SELECT count(*) FROM inbound WHERE channel = 'feishu'").fetchone()[0]


@pytest.fixture
async def rig(tmp_path) -> AsyncIterator[Callable[..., Awaitable[FeishuRig]]]:
    need_module("lark_oapi")
    async with contextlib.AsyncExitStack() as stack:
        env = f"FEISHU_SECRET_{uuid.uuid4().hex[:8].upper()}"
        stack.callback(lambda: os.environ.pop(env, None))

        async def open_(**settings: Any) -> FeishuRig:
            server = await stack.enter_async_context(FeishuServer())
            os.environ[env] = server.secret
            if settings.get("inbound") == "webhook":
                os.environ[env + "_KEY"], os.environ[env + "_TOKEN"] = ENCRYPT_KEY, VERIFY_TOKEN
                stack.callback(lambda: [os.environ.pop(env + s, None) for s in ("_KEY", "_TOKEN")])
                settings = {"encrypt_key": f"env:{env}_KEY", "verification_token": f"env:{env}_TOKEN", **settings}
            responder = ContractResponder()
            config = parse_config({
                "data_dir": str(tmp_path / f"data-{uuid.uuid4().hex[:6]}"),
                "partners": [{"id": "tutor", "name": "Tutor"}],
                "bindings": [{"partner": "tutor", "channel": "feishu", "account": "school"}],
                "channels": {"feishu": {"school": account_settings(server, env, **settings)}},
                "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
            })
            gateway = Gateway(config, responder=responder)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            assert gateway.channel("feishu", "school") is not None, gateway.unavailable
            made = FeishuRig(server, gateway, responder)
            if settings.get("inbound") == "webhook":
                made.url = await stack.enter_async_context(served(gateway)) + "/webhooks/feishu/school"
            else:
                await server.connected()
            return made

        yield open_
