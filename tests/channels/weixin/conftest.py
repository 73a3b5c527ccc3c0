"""A gateway with one WeChat Official Account on the WeChat emulator, served on loopback.

The emulator (tests/peers/weixin_oa_server.py) plays WeChat both ways: it
posts signed (and, in safe mode, encrypted) callbacks to the gateway's webhook
route, and serves ``cgi-bin/token`` and ``cgi-bin/message/custom/send``.  The
gateway is the real one on its durable SQLite store, answering with the
contract suite's echoing responder unless a test builds the brain.
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
from tests.peers.weixin_oa_server import WechatOA

TEACHER = "o-teacher"


@dataclass
class OaRig:
    oa: WechatOA
    gateway: Gateway
    responder: ContractResponder | None

    async def texts(self, openid: str, count: int) -> list[str]:
        async def enough():
            texts = self.oa.texts_to(openid)
            return texts if len(texts) >= count else None

        return await eventually(enough, what=f"{count} messages to {openid}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")

    def inbound_rows(self) -> int:
        with closing(sqlite3.connect(self.gateway.config.database_path)) as db:
            return db.execute("SELECT count(*) FROM inbound WHERE channel = 'weixin'").fetchone()[0]


def account_settings(oa: WechatOA, api_base: str, env: dict[str, str]) -> dict[str, Any]:
    for name, value in (("secret", oa.appsecret), ("token", oa.token), ("key", oa.aes_key)):
        os.environ[env[name]] = value
    return {"kind": "official_account", "appid": oa.appid, "appsecret": f"env:{env['secret']}",
            "token": f"env:{env['token']}", "encoding_aes_key": f"env:{env['key']}", "mode": oa.mode,
            "api_base": api_base, "access": {"dm": "open"}}


@pytest.fixture
async def open_rig(tmp_path) -> AsyncIterator[Callable[..., Awaitable[OaRig]]]:
    """``await open_rig(mode="safe")``: a fresh account at a fresh emulator, and a gateway answering it."""
    async with contextlib.AsyncExitStack() as stack:
        tag = uuid.uuid4().hex[:8].upper()
        env = {name: f"WEIXIN_{name.upper()}_{tag}" for name in ("secret", "token", "key")}
        stack.callback(lambda: [os.environ.pop(name, None) for name in env.values()])

        async def open_(*, mode: str = "safe", passive: bool = True, config: Callable[[dict], dict] | None = None,
                        responder: ContractResponder | None = None) -> OaRig:
            oa = WechatOA(mode=mode)  # WeChat waits 5 s for each answer
            api = await stack.enter_async_context(serving(oa))
            raw = {
                "data_dir": str(tmp_path / f"data-{tag}"),
                "partners": [{"id": "tutor", "name": "Tutor",
                              "owners": [{"channel": "weixin", "user": TEACHER, "account": "school"}]}],
                "bindings": [{"partner": "tutor", "channel": "weixin", "account": "school"}],
                "channels": {"weixin": {"school": {**account_settings(oa, api, env), "passive_reply": passive}}},
                "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
            }
            chosen = ContractResponder() if responder is None and config is None else responder
            gateway = Gateway(parse_config(config(raw) if config else raw), responder=chosen)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            assert gateway.channel("weixin", "school") is not None, gateway.unavailable
            url = await stack.enter_async_context(served(gateway))
            oa.callback_url = f"{url}/webhooks/weixin/school"
            return OaRig(oa, gateway, chosen)

        yield open_
from tests.channels.weixin.ilink_rig import ilink_rig  # noqa: E402,F401 -- the personal WeChat rig, for its tests
