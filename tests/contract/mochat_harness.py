"""Contract harness for the ``mochat`` channel against the loopback Mochat (tests/peers/mochat_server.py).

python-socketio (msgpack) dials the emulator's Socket.IO server and the REST
calls go over httpx to the same aiohttp app.  Mochat pushes only what the agent
subscribed to, so the account hears a fixed pool of sessions and panels and
each :meth:`say` without a ``chat`` takes the next one.

Features left out, and why:

- ``own_echo``: the agent's own events are left out of a batch before they
  reach the gateway (channels/mochat/decode.py), not reported as own echoes.
- ``lost_response``: Mochat's send routes take no idempotency key, so a
  retried send after a lost answer cannot be promised to show once.
- ``outage``: while the socket is down the channel keeps answering by the REST
  fallback and reports itself running (polling), never in error.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.peers.mochat_server import MochatServer
from tests.peers.mochat_server import Said as MochatSaid

POOL = 8
SESSIONS = tuple(f"s-contract{i}" for i in range(POOL))
PANELS = tuple(f"p-contract{i}" for i in range(POOL))


class MochatHarness:
    channel = "mochat"
    account = "school"
    features: frozenset[str] = frozenset({"groups", "faults", "credentials", "slow_send"})

    @classmethod
    def create(cls, request: Any) -> MochatHarness:
        return cls()

    def __init__(self) -> None:
        self.server = MochatServer(token="claw_" + uuid.uuid4().hex)
        self.env = f"MOCHAT_TOKEN_{uuid.uuid4().hex[:8].upper()}"
        self._sessions = iter(SESSIONS)
        self._panels = iter(PANELS)
        self._users = 0

    async def start(self, workdir: Path) -> None:
        await self.server.__aenter__()
        os.environ[self.env] = self.server.token

    def _config(self, data_dir: Path, env: str) -> Config:
        return parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: {
                "base_url": self.server.url, "claw_token": f"env:{env}", "agent_user_id": self.server.agent,
                "sessions": list(SESSIONS), "panels": list(PANELS), "watch_timeout_s": 1.0,
                "socket_retry_max_s": 1.0, "panel_poll_s": 0.2, "connect_timeout_s": 3.0,
                "access": {"dm": "open", "group": "mention"}}}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    def gateway_config(self, data_dir: Path) -> Config:
        return self._config(data_dir, self.env)

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        wrong = "claw_" + uuid.uuid4().hex
        os.environ[self.env + "_WRONG"] = wrong
        return self._config(data_dir, self.env + "_WRONG"), wrong

    async def attach(self, gateway: Any) -> None:
        await self.server.connected()

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        self._users += 1
        user = f"u-contract{self._users}"
        if group:
            said = await self.server.say_in_panel(text, panel=chat or next(self._panels), user=user, mention=mention)
        else:
            said = await self.server.say(text, session=chat or next(self._sessions), user=user)
        return Said(chat=said.chat, user=user, text=text, ref=said)

    async def say_again(self, said: Said) -> None:
        assert isinstance(said.ref, MochatSaid)
        await self.server.redeliver(said.ref)

    async def seen(self, chat: str) -> list[Seen]:
        return [Seen(id=s.id, text=s.content, reply_to=s.reply_to) for s in self.server.shown(chat)]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self.server.fail_next_send(status, retry_after)

    async def rate_limited_sends(self) -> int:
        return self.server.rate_limited_sends

    async def send_requests(self) -> int:
        return self.server.send_requests

    async def slow_sends(self, seconds: float) -> None:
        self.server.send_delay_s = seconds

    async def stop(self) -> None:
        await self.server.__aexit__(None, None, None)
        os.environ.pop(self.env, None)
        os.environ.pop(self.env + "_WRONG", None)
