"""A gateway with Slack accounts on the session's Slack emulator, and the users who talk to them.

Every rig registers its own app (bot token) at the emulator, so tests never
share channels, events or faults.  The gateway is the real one on the durable
SQLite path, answering with the contract suite's :class:`ContractResponder`;
in Events API mode its HTTP app is served on a free loopback port and the
emulator posts signed callbacks to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.http.app import build_app
from gateway.http.server import serve_http
from tests.contract.harness import ContractResponder, eventually, settled
from tests.contract.slack_harness import SlackHarness


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class SlackRig:
    harness: SlackHarness
    gateway: Gateway
    responder: ContractResponder
    url: str | None = None
    """The gateway's HTTP address, in Events API mode."""

    @property
    def users(self) -> Any:
        return self.harness.users

    @property
    def channel(self) -> Any:
        return self.gateway.channel("slack", self.harness.account)

    async def replies(self, chat: str, count: int, *, what: str = "replies") -> list[dict]:
        async def enough():
            shown = (await self.users.seen()).get(chat, [])
            return shown if len(shown) >= count else None

        return await eventually(enough, what=f"{count} {what} in {chat}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")

    def stored(self, event_id: str) -> bool:
        with closing(sqlite3.connect(self.gateway.config.database_path)) as db:
            return db.execute("SELECT count(*) FROM inbound WHERE channel = 'slack' AND event_id = ?",
                              (event_id,)).fetchone()[0] == 1

    def inbound_rows(self) -> int:
        with closing(sqlite3.connect(self.gateway.config.database_path)) as db:
            return db.execute("SELECT count(*) FROM inbound WHERE channel = 'slack'").fetchone()[0]


@pytest.fixture
async def open_rig(request, tmp_path) -> AsyncIterator[Callable[..., Awaitable[SlackRig]]]:
    """Start a gateway on a fresh app: ``await open_rig(mode="events", partner={...}, **account_settings)``."""
    api = request.getfixturevalue("slack_api")
    async with contextlib.AsyncExitStack() as stack:

        async def open_(*, mode: str = "socket", app: dict | None = None, partner: dict | None = None,
                        **settings: Any) -> SlackRig:
            harness = SlackHarness(api, mode=mode)
            harness.partner = partner or {}
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            await harness.users.register(**(app or {}),
                                         **({"request_url": f"{url}/webhooks/slack/school"} if mode == "events" else {}))
            await harness.start(tmp_path)
            stack.push_async_callback(harness.stop)
            await harness.users.settings(retry_delays=[0.05, 0.1, 0.2], ack_timeout=1.0)
            responder = ContractResponder()
            gateway = Gateway(harness.gateway_config(tmp_path / f"data-{port}", **settings), responder=responder)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            assert gateway.channel("slack", harness.account) is not None, gateway.unavailable
            if mode == "events":
                server = asyncio.create_task(serve_http(build_app(gateway), "127.0.0.1", port, shutdown_timeout=1))

                async def stop_server() -> None:
                    server.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await server

                stack.push_async_callback(stop_server)
            return SlackRig(harness, gateway, responder, url if mode == "events" else None)

        yield open_
