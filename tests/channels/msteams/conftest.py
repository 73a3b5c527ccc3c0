"""A gateway with one Teams bot on the Bot Framework emulator, served on loopback.

The emulator (tests/peers/msteams_server.py) plays Teams both ways: it posts
signed activities to the gateway's webhook route and serves the OpenID
metadata, keys, token endpoint and Bot Connector.  The gateway is the real
one on its durable SQLite store, answering with the contract suite's echoing
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
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import ContractResponder, eventually, settled
from tests.e2e.rig import served
from tests.peers.msteams_server import TeamsPeer
from tests.peers.tencent_api import serving


@dataclass
class TeamsRig:
    peer: TeamsPeer
    gateway: Gateway
    responder: ContractResponder | None
    data_dir: Path

    async def texts(self, conversation: str, count: int) -> list[str]:
        async def enough():
            texts = [s.text for s in self.peer.seen_in(conversation)]
            return texts if len(texts) >= count else None

        return await eventually(enough, what=f"{count} messages in {conversation}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")

    def inbound_rows(self) -> int:
        with closing(sqlite3.connect(self.gateway.config.database_path)) as db:
            return db.execute("SELECT count(*) FROM inbound WHERE channel = 'msteams'").fetchone()[0]


def account_settings(peer: TeamsPeer, env: str) -> dict[str, Any]:
    os.environ[env] = peer.secret
    return {"app_id": peer.app_id, "app_password": f"env:{env}", **peer.settings(),
            "access": {"dm": "open", "group": "mention"}}


@pytest.fixture
async def teams_rig(tmp_path) -> AsyncIterator[Callable[..., Awaitable[TeamsRig]]]:
    """``await teams_rig()``: a fresh bot at a fresh emulator, and a gateway answering it
    (``peer=`` and ``data=`` start another gateway on the same emulator and data, as after a restart)."""
    async with contextlib.AsyncExitStack() as stack:
        env = f"MSTEAMS_SECRET_{uuid.uuid4().hex[:8].upper()}"
        stack.callback(lambda: os.environ.pop(env, None))

        async def open_(*, config: Callable[[dict], dict] | None = None, responder: ContractResponder | None = None,
                        peer: TeamsPeer | None = None, data: Path | None = None) -> TeamsRig:
            if peer is None:
                peer = TeamsPeer()
                peer.base = await stack.enter_async_context(serving(peer))  # type: ignore[arg-type]
            data_dir = data or tmp_path / f"data-{uuid.uuid4().hex[:6]}"
            raw = {
                "data_dir": str(data_dir),
                "partners": [{"id": "tutor", "name": "Tutor"}],
                "bindings": [{"partner": "tutor", "channel": "msteams", "account": "school"}],
                "channels": {"msteams": {"school": account_settings(peer, env)}},
                "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
            }
            chosen = ContractResponder() if responder is None and config is None else responder
            gateway = Gateway(parse_config(config(raw) if config else raw), responder=chosen)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            assert gateway.channel("msteams", "school") is not None, gateway.unavailable
            url = await stack.enter_async_context(served(gateway))
            peer.callback_url = f"{url}/webhooks/msteams/school"
            return TeamsRig(peer, gateway, chosen, data_dir)

        yield open_
