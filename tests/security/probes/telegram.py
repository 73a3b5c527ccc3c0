"""Telegram's place in the webhook suites: its scheme, a minimal update, and a two-account rig.

The rig is a real gateway with two webhook accounts on the session's Bot API
emulator (tests/peers/telegram_server.py), served by the real HTTP app on a
loopback port, answering with the contract suite's echo responder.  Replies go
through the emulator, so "answered once" is counted where a learner would see it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sqlite3
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from channels.telegram.channel import SECRET_HEADER
from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.http.app import build_app
from gateway.http.server import serve_http
from tests.channels.telegram.conftest import new_id
from tests.contract.harness import ContractResponder, eventually, settled
from tests.peers.telegram_peer import TelegramUsers
from tests.security.probes.webhooks import Proof, WebhookScheme
from tests.waits import HANG_S, HTTP_S

SCHEME = WebhookScheme(channel="telegram", proof=Proof.SECRET_HEADER, header=SECRET_HEADER)
"""Telegram sends the ``secret_token`` given to setWebhook back, verbatim, in this header."""
ACCOUNTS = ("main", "second")


def update(number: int, chat: int, text: str) -> dict:
    """The smallest private-chat text update python-telegram-bot reads."""
    person = {"id": chat, "is_bot": False, "first_name": "Ann"}
    return {"update_id": number, "message": {"message_id": number, "date": 1_700_000_000, "text": text,
                                             "chat": {"id": chat, "type": "private", "first_name": "Ann"},
                                             "from": person}}


def malformed() -> dict[str, bytes]:
    """Authentic bodies no Telegram update has: missing fields, wrong types, kinds the account does not take."""
    chat = 10**12 + 7
    good = update(1, chat, "hi")
    message = good["message"]
    shapes: dict[str, object] = {
        "no update_id": {"message": message},
        "update_id as a string": {**good, "update_id": "one"},
        "message as a list": {**good, "message": [message]},
        "message as a string": {**good, "message": "hi"},
        "a message without a chat": {**good, "message": {k: v for k, v in message.items() if k != "chat"}},
        "a chat id as an object": {**good, "message": {**message, "chat": {"id": {"$gt": 0}, "type": "private"}}},
        "text as a number": {**good, "message": {**message, "text": 42}},
        "an unknown update kind": {"update_id": 2, "quantum_entanglement": {"id": 1}},
        "an update kind it does not take": {"update_id": 3, "poll": {"id": "1", "question": "?", "options": []}},
    }
    return {name: json.dumps(shape).encode() for name, shape in shapes.items()}


@dataclass
class TelegramWebhookRig:
    """What the webhook suites need, for Telegram (see :class:`tests.security.probes.webhooks.WebhookRig`)."""

    scheme: WebhookScheme
    http: httpx.AsyncClient
    secrets: Mapping[str, str]
    gateway: Gateway
    responder: ContractResponder
    users: TelegramUsers
    chat: int

    def path(self, account: str) -> str:
        return f"/webhooks/telegram/{account}"

    def event(self, number: int, text: str) -> bytes:
        return json.dumps(update(number, self.chat, text)).encode()

    async def turns(self) -> int:
        return len(self.responder.turns)

    async def covered(self) -> list[str]:
        return [str(message.event_id) for turn in self.responder.turns for message in turn.messages]

    async def replies(self) -> int:
        return len((await self.users.seen()).get(str(self.chat), []))

    async def settle(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")

    def inbound_rows(self) -> int:
        with closing(sqlite3.connect(self.gateway.config.database_path)) as db:
            return db.execute("SELECT count(*) FROM inbound WHERE channel = 'telegram'").fetchone()[0]


@contextlib.asynccontextmanager
async def telegram_rig(request: pytest.FixtureRequest, data_dir: Path) -> AsyncIterator[TelegramWebhookRig]:
    api_url: str = request.getfixturevalue("telegram_api")
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    port = _free_port()
    async with contextlib.AsyncExitStack() as stack:
        secrets: dict[str, str] = {}
        accounts: dict[str, dict] = {}
        users: dict[str, TelegramUsers] = {}
        for account in ACCOUNTS:
            token, secret = f"{random.randrange(10**8, 10**9)}:{uuid.uuid4().hex}", f"{account}-{uuid.uuid4().hex}"
            token_env, secret_env = (f"TG_{kind}_{uuid.uuid4().hex[:8].upper()}" for kind in ("TOKEN", "HOOK"))
            for name, value in ((token_env, token), (secret_env, secret)):
                os.environ[name] = value
                stack.callback(os.environ.pop, name, None)
            users[account] = TelegramUsers(api_url, token)
            stack.push_async_callback(users[account].aclose)
            await users[account].register()
            secrets[account] = secret
            accounts[account] = {"token": f"env:{token_env}", "api_url": api_url, "mode": "webhook",
                                 "webhook_url": f"http://127.0.0.1:{port}/webhooks/telegram/{account}",
                                 "webhook_secret": f"env:{secret_env}", "access": {"dm": "open"}}
        config = parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": "telegram", "account": a} for a in ACCOUNTS],
            "channels": {"telegram": accounts},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
        })
        responder = ContractResponder()
        gateway = Gateway(config, responder=responder)
        await gateway.start()
        stack.push_async_callback(gateway.stop)
        server = asyncio.create_task(serve_http(build_app(gateway), "127.0.0.1", port, on_ready=ready.set_result,
                                                shutdown_timeout=1))
        stack.push_async_callback(_cancel, server)
        url = await asyncio.wait_for(ready, HANG_S)
        http = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=HTTP_S, trust_env=False))
        chat = new_id()
        await users["main"].open_chat({"id": chat, "type": "private"})
        yield TelegramWebhookRig(SCHEME, http, secrets, gateway, responder, users["main"], chat)


def _free_port() -> int:
    """A port for the webhook URL, which setWebhook needs before the server listens."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
