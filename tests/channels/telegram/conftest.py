"""A gateway with one Telegram account on the session's Bot API emulator, and the users who talk to it.

Every rig registers its own bot token at the emulator, so tests never share
chats, updates or faults.  The gateway is the real one on the durable SQLite
path, answering with the contract suite's :class:`ContractResponder`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import ContractResponder, eventually, settled
from tests.peers.telegram_peer import TelegramUsers

_ids = itertools.count(1)
_BASE = random.randrange(10**6, 10**9)


def new_id() -> int:
    """A user or private-chat id no other test in this session uses."""
    return _BASE + next(_ids)


def new_group() -> int:
    return -(10**12 + new_id())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class TelegramRig:
    users: TelegramUsers
    gateway: Gateway
    responder: ContractResponder
    bot: dict
    data_dir: Path
    settings: dict = field(default_factory=dict)

    @property
    def channel(self) -> Any:
        return self.gateway.channel("telegram", "main")

    async def replies(self, chat: int, count: int, *, what: str = "replies") -> list[dict]:
        async def enough():
            shown = (await self.users.seen()).get(str(chat), [])
            return shown if len(shown) >= count else None

        return await eventually(enough, what=f"{count} {what} in chat {chat}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")


@pytest.fixture
async def open_rig(request, tmp_path) -> AsyncIterator[Callable[..., Awaitable[TelegramRig]]]:
    """Start a gateway on a fresh bot: ``await open_rig(privacy=True, **account_settings)``."""
    api_url = request.getfixturevalue("telegram_api")
    async with contextlib.AsyncExitStack() as stack:

        async def open_(*, privacy: bool = True, token: str | None = None, data_dir: Path | None = None,
                        responder: ContractResponder | None = None, register: bool = True, knows_drafts: bool = True,
                        **settings: Any) -> TelegramRig:
            token = token or f"{random.randrange(10**8, 10**9)}:{uuid.uuid4().hex}"
            env = f"TELEGRAM_TOKEN_{uuid.uuid4().hex[:8].upper()}"
            os.environ[env] = token
            stack.callback(os.environ.pop, env, None)
            users = TelegramUsers(api_url, token)
            stack.push_async_callback(users.aclose)
            bot = await users.register(privacy=privacy, knows_drafts=knows_drafts) if register else {}
            data_dir = data_dir or tmp_path / f"data-{uuid.uuid4().hex[:6]}"
            account = {"token": f"env:{env}", "api_url": api_url, "poll_timeout": 2,
                       "access": {"dm": "open", "group": "mention"}, **settings}
            config = parse_config({
                "data_dir": str(data_dir),
                "partners": [{"id": "tutor", "name": "Tutor"}],
                "bindings": [{"partner": "tutor", "channel": "telegram", "account": "main"}],
                "channels": {"telegram": {"main": account}},
                "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
            })
            responder = responder or ContractResponder()
            gateway = Gateway(config, responder=responder)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            assert gateway.channel("telegram", "main") is not None, gateway.unavailable
            return TelegramRig(users, gateway, responder, bot, data_dir, settings)

        yield open_
