"""A gateway with one QQ bot on the QQ emulator, served on loopback.

The emulator (tests/peers/qq_server.py) plays QQ both ways: it posts signed
events to the gateway's webhook route (or, with ``websocket=True``, serves its
websocket gateway and dispatches there) and serves the token and the OpenAPI.
The gateway is the real one on its durable SQLite store, answering with the
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
from tests.peers.qq_server import QQPeer
from tests.peers.tencent_api import serving

TEACHER = "TEACHEROPENID0001"


@dataclass
class QQRig:
    peer: QQPeer
    gateway: Gateway
    responder: ContractResponder | None
    raw: dict
    """The gateway's configuration, for a test that starts another gateway on the same store."""

    async def texts(self, chat: str, count: int) -> list[str]:
        async def enough():
            texts = self.peer.texts_to(chat)
            return texts if len(texts) >= count else None

        return await eventually(enough, what=f"{count} messages to {chat}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")

    def reports(self) -> list[tuple[str, str, str]]:
        """The teacher's reports the gateway queued: (state, why it was not sent, what it says)."""
        with closing(sqlite3.connect(self.gateway.config.database_path)) as db:
            rows = db.execute("SELECT state, coalesce(last_error, ''), payload FROM outbox "
                              "WHERE payload LIKE '%could not be sent%'").fetchall()
        return [(str(s), str(e), str(p)) for s, e, p in rows]

    def inbound_rows(self) -> int:
        with closing(sqlite3.connect(self.gateway.config.database_path)) as db:
            return db.execute("SELECT count(*) FROM inbound WHERE channel = 'qq'").fetchone()[0]


def account_settings(peer: QQPeer, api_base: str, env: str) -> dict[str, Any]:
    os.environ[env] = peer.secret
    return {"app_id": peer.app_id, "app_secret": f"env:{env}", "api_base": api_base,
            "token_url": f"{api_base}app/getAppAccessToken", "access": {"dm": "open"}}


@pytest.fixture
async def qq_rig(tmp_path) -> AsyncIterator[Callable[..., Awaitable[QQRig]]]:
    """``await qq_rig()``: a fresh bot at a fresh emulator, and a gateway answering it."""
    async with contextlib.AsyncExitStack() as stack:
        tag = uuid.uuid4().hex[:8].upper()
        env = f"QQ_SECRET_{tag}"
        stack.callback(lambda: os.environ.pop(env, None))

        async def open_(*, config: Callable[[dict], dict] | None = None, responder: ContractResponder | None = None,
                        websocket: bool = False, heartbeat_ms: int = 45_000) -> QQRig:
            peer = QQPeer(heartbeat_ms=heartbeat_ms)
            api = await stack.enter_async_context(serving(peer))
            settings = account_settings(peer, api, env)
            if websocket:
                await stack.enter_async_context(peer.gateway())
                settings["mode"] = "websocket"
            raw = {
                "data_dir": str(tmp_path / f"data-{tag}"),
                "partners": [{"id": "tutor", "name": "Tutor",
                              "owners": [{"channel": "qq", "user": TEACHER, "account": "school"}]}],
                "bindings": [{"partner": "tutor", "channel": "qq", "account": "school"}],
                "channels": {"qq": {"school": settings}},
                "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
            }
            chosen = ContractResponder() if responder is None and config is None else responder
            raw = config(raw) if config else raw
            gateway = Gateway(parse_config(raw), responder=chosen)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            assert gateway.channel("qq", "school") is not None, gateway.unavailable
            url = await stack.enter_async_context(served(gateway))
            peer.callback_url = f"{url}/webhooks/qq/school"
            return QQRig(peer, gateway, chosen, raw)

        yield open_
