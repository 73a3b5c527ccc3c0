"""A gateway with one WhatsApp business number on the Cloud API emulator, served on loopback.

The emulator (tests/peers/whatsapp_server.py) plays Meta both ways: it posts
signed webhooks to the gateway's route and serves the Graph API.  The gateway
is the real one on its durable SQLite store, answering with the contract
suite's echoing responder unless a test builds the brain.
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
from tests.peers.whatsapp_server import VERSION, WhatsappPeer

TEACHER = "15550009999"
VERIFY = "verify-token-of-the-school"


@dataclass
class WhatsappRig:
    peer: WhatsappPeer
    gateway: Gateway
    responder: ContractResponder | None

    @property
    def channel(self) -> Any:
        return self.gateway.channel("whatsapp", "school")

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
            return db.execute("SELECT count(*) FROM inbound WHERE channel = 'whatsapp'").fetchone()[0]


def account_settings(peer: WhatsappPeer, env: dict[str, str], templates: dict | None = None) -> dict[str, Any]:
    os.environ[env["token"]], os.environ[env["secret"]], os.environ[env["verify"]] = peer.token, peer.app_secret, VERIFY
    return {"phone_number_id": peer.phone_number_id, "access_token": f"env:{env['token']}",
            "app_secret": f"env:{env['secret']}", "verify_token": f"env:{env['verify']}",
            "graph_base": peer.base.rstrip("/"), "api_version": VERSION, "access": {"dm": "open"},
            **({"templates": templates} if templates else {})}


@pytest.fixture
async def whatsapp_rig(tmp_path) -> AsyncIterator[Callable[..., Awaitable[WhatsappRig]]]:
    """``await whatsapp_rig()``: a fresh number at a fresh emulator, and a gateway answering it."""
    async with contextlib.AsyncExitStack() as stack:
        tag = uuid.uuid4().hex[:8].upper()
        env = {name: f"WHATSAPP_{name.upper()}_{tag}" for name in ("token", "secret", "verify")}
        stack.callback(lambda: [os.environ.pop(name, None) for name in env.values()])

        async def open_(*, config: Callable[[dict], dict] | None = None, responder: ContractResponder | None = None,
                        templates: dict | None = None) -> WhatsappRig:
            peer = WhatsappPeer(retry_after_s=0.5)
            peer.base = await stack.enter_async_context(serving(peer))  # type: ignore[arg-type]
            raw = {
                "data_dir": str(tmp_path / f"data-{tag}"),
                "partners": [{"id": "tutor", "name": "Tutor",
                              "owners": [{"channel": "whatsapp", "user": TEACHER, "account": "school"}]}],
                "bindings": [{"partner": "tutor", "channel": "whatsapp", "account": "school"}],
                "channels": {"whatsapp": {"school": account_settings(peer, env, templates)}},
                "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
            }
            chosen = ContractResponder() if responder is None and config is None else responder
            gateway = Gateway(parse_config(config(raw) if config else raw), responder=chosen)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            assert gateway.channel("whatsapp", "school") is not None, gateway.unavailable
            url = await stack.enter_async_context(served(gateway))
            peer.callback_url = f"{url}/webhooks/whatsapp/school"
            return WhatsappRig(peer, gateway, chosen)

        yield open_
