"""A gateway with one WeCom self-built app on the WeCom emulator, served on loopback.

The emulator (tests/peers/wecom_app_server.py) plays WeCom both ways: it posts
signed, encrypted callbacks to the gateway's webhook route, and serves
``cgi-bin/gettoken`` and ``cgi-bin/message/send``.  The gateway is the real one
on its durable SQLite store, answering with the contract suite's echoing
responder unless a test builds the brain.
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
from tests.peers.tencent_api import serving
from tests.peers.wecom_app_server import WecomApp


@dataclass
class AppRig:
    peer: WecomApp
    gateway: Gateway
    responder: ContractResponder | None

    async def texts(self, userid: str, count: int) -> list[str]:
        async def enough():
            texts = self.peer.texts_to(userid)
            return texts if len(texts) >= count else None

        return await eventually(enough, what=f"{count} messages to {userid}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")

    def inbound_rows(self) -> int:
        with closing(sqlite3.connect(self.gateway.config.database_path)) as db:
            return db.execute("SELECT count(*) FROM inbound WHERE channel = 'wecom'").fetchone()[0]


def app_settings(peer: WecomApp, api_base: str, env: dict[str, str]) -> dict[str, Any]:
    for name, value in (("secret", peer.corpsecret), ("token", peer.token), ("key", peer.aes_key)):
        os.environ[env[name]] = value
    return {"mode": {"kind": "app", "corpid": peer.corpid, "corpsecret": f"env:{env['secret']}", "agentid": peer.agentid,
                     "token": f"env:{env['token']}", "encoding_aes_key": f"env:{env['key']}", "api_base": api_base},
            "access": {"dm": "open"}}


@pytest.fixture
async def app_rig(tmp_path) -> AsyncIterator[Callable[..., Awaitable[AppRig]]]:
    """``await app_rig()``: a fresh app at a fresh emulator, and a gateway answering it."""
    async with contextlib.AsyncExitStack() as stack:
        tag = uuid.uuid4().hex[:8].upper()
        env = {name: f"WECOM_APP_{name.upper()}_{tag}" for name in ("secret", "token", "key")}
        stack.callback(lambda: [os.environ.pop(name, None) for name in env.values()])

        async def open_(*, config: Callable[[dict], dict] | None = None,
                        responder: ContractResponder | None = None) -> AppRig:
            peer = WecomApp()
            api = await stack.enter_async_context(serving(peer))
            raw = {
                "data_dir": str(tmp_path / f"data-{tag}"),
                "partners": [{"id": "tutor", "name": "Tutor"}],
                "bindings": [{"partner": "tutor", "channel": "wecom", "account": "school"}],
                "channels": {"wecom": {"school": app_settings(peer, api, env)}},
                "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
            }
            chosen = ContractResponder() if responder is None and config is None else responder
            gateway = Gateway(parse_config(config(raw) if config else raw), responder=chosen)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            assert gateway.channel("wecom", "school") is not None, gateway.unavailable
            url = await stack.enter_async_context(served(gateway))
            peer.callback_url = f"{url}/webhooks/wecom/school"
            return AppRig(peer, gateway, chosen)

        yield open_
