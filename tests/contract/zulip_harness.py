"""Contract harness for the ``zulip`` channel against the loopback Zulip (tests/peers/zulip_server.py).

The channel's httpx client registers a queue and long-polls the emulator's
``GET /events`` over a socket, as it does a real Zulip.  A direct chat is a
one-to-one DM from a new person each time; a group is a stream's topic.

Features left out, and why:

- ``lost_response``: ``POST /messages`` takes no idempotency key, so a retried
  send after a lost answer cannot be promised to show once (ADR 0048).
- ``slow_send``: not grown in the emulator yet.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen, eventually
from tests.peers.zulip_server import BOT_EMAIL, ZulipServer
from tests.peers.zulip_server import Said as ZulipSaid


class ZulipHarness:
    channel = "zulip"
    account = "school"
    features: frozenset[str] = frozenset({"groups", "own_echo", "faults", "outage", "credentials"})

    @classmethod
    def create(cls, request: Any) -> ZulipHarness:
        return cls()

    def __init__(self) -> None:
        self.server = ZulipServer(key="zk" + uuid.uuid4().hex, heartbeat_s=1.0)
        self.env = f"ZULIP_KEY_{uuid.uuid4().hex[:8].upper()}"
        self._people = 0
        self._topics = 0

    async def start(self, workdir: Path) -> None:
        await self.server.__aenter__()
        os.environ[self.env] = self.server.key

    def settings(self, env: str) -> dict[str, Any]:
        return {"site": self.server.url, "email": BOT_EMAIL, "api_key": f"env:{env}", "poll_timeout_s": 10.0,
                "access": {"dm": "open", "group": "mention"}}

    def _config(self, data_dir: Path, env: str) -> Config:
        return parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: self.settings(env)}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    def gateway_config(self, data_dir: Path) -> Config:
        return self._config(data_dir, self.env)

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        wrong = "zk" + uuid.uuid4().hex
        os.environ[self.env + "_WRONG"] = wrong
        return self._config(data_dir, self.env + "_WRONG"), wrong

    async def attach(self, gateway: Any) -> None:
        await eventually(lambda: self.server.registers >= 1 and self.server.polls >= 1, what="the bot to poll its queue")

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        if group:  # a stream of its own per new group conversation, its topic "homework"
            if chat is None:
                self._topics += 1
                stream = f"class {self._topics}"
            else:
                stream = self._stream_of(chat)
            said = await self.server.say(text, user="Class Member", stream=stream, topic="homework", mention=mention)
        elif chat is None:
            self._people += 1
            said = await self.server.say(text, user=f"Learner {self._people}")
        else:
            said = await self.server.say(text, user=self.server.users[int(chat)])
        return Said(chat=said.chat, user=str(said.message["sender_id"]), text=text, ref=said)

    def _stream_of(self, chat: str) -> str:
        stream_id = int(chat.removeprefix("stream:"))
        return next(n for n, i in self.server.streams.items() if i == stream_id)

    async def say_again(self, said: Said) -> None:
        assert isinstance(said.ref, ZulipSaid)
        await self.server.redeliver(said.ref)

    async def say_as_bot(self, text: str, *, chat: str) -> Said:
        await self.server.say_as_bot(text, chat=chat)
        return Said(chat=chat, user="100", text=text)

    async def seen(self, chat: str) -> list[Seen]:
        return [Seen(id=str(s.id), text=s.content) for s in self.server.shown(chat)]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self.server.fail_next_send(status, retry_after)

    async def rate_limited_sends(self) -> int:
        return self.server.rate_limited_sends

    async def send_requests(self) -> int:
        return self.server.send_requests

    async def outage(self, down: bool) -> None:
        self.server.down = down

    async def stop(self) -> None:
        await self.server.__aexit__(None, None, None)
        os.environ.pop(self.env, None)
        os.environ.pop(self.env + "_WRONG", None)
