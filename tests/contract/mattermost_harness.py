"""Contract harness for the ``mattermost`` channel against the loopback Mattermost (tests/peers/mattermost_server.py).

The channel's httpx client and the kit's websocket session talk to the
emulator's aiohttp app over a loopback socket.  ``outage`` is real to the
channel: while the server is down every call is 503 and handshakes are
refused, a post said then is only in the channel's history, and the catch-up
after the account's restart finds it.  Features left out, and why:

- ``lost_response``: ``POST /posts`` takes no idempotency key Mattermost
  documents, so a retried send after a lost answer cannot be promised to show once.
"""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.peers.mattermost_server import MattermostServer, Post


class MattermostHarness:
    channel = "mattermost"
    account = "school"
    features: frozenset[str] = frozenset({"groups", "own_echo", "faults", "outage", "slow_send", "credentials"})

    @classmethod
    def create(cls, request: Any) -> MattermostHarness:
        return cls()

    def __init__(self) -> None:
        self.server = MattermostServer()
        self.env = f"MATTERMOST_TOKEN_{uuid.uuid4().hex[:8].upper()}"
        self._n = itertools.count(1)

    async def start(self, workdir: Path) -> None:
        await self.server.__aenter__()
        os.environ[self.env] = self.server.token

    def _config(self, data_dir: Path, env: str) -> Config:
        return parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: {
                "url": self.server.url, "token": f"env:{env}",
                "access": {"dm": "open", "group": "mention"}}}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    def gateway_config(self, data_dir: Path) -> Config:
        return self._config(data_dir, self.env)

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        wrong = uuid.uuid4().hex[:26]
        os.environ[self.env + "_WRONG"] = wrong
        return self._config(data_dir, self.env + "_WRONG"), wrong

    async def attach(self, gateway: Any) -> None:
        await self.server.connected()

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        n = next(self._n)
        user = f"user{n:022d}"
        channel = chat or f"{'o' if group else 'd'}{uuid.uuid4().hex[:25]}"
        post = await self.server.say(text, channel=channel, user=user, kind="O" if group else "D", mention=mention)
        return Said(chat=channel, user=user, text=text, ref=post)

    async def say_again(self, said: Said) -> None:
        assert isinstance(said.ref, Post)
        await self.server.redeliver(said.ref)

    async def say_as_bot(self, text: str, *, chat: str) -> Said:
        post = await self.server.say(text, channel=chat, user=self.server.bot_id)
        return Said(chat=chat, user=self.server.bot_id, text=text, ref=post)

    async def seen(self, chat: str) -> list[Seen]:
        shown = self.server.shown(chat)
        return [Seen(id=p.id, text=p.message, reply_to=p.root_id or None,
                     attachments=(*(a.get("image_url", "") for a in p.props.get("attachments", [])),
                                  *(self.server.files[f]["name"] for f in p.file_ids)))
                for p in shown]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self.server.fail_next_send(status, retry_after)

    async def rate_limited_sends(self) -> int:
        return self.server.rate_limited_sends

    async def send_requests(self) -> int:
        return self.server.send_requests

    async def slow_sends(self, seconds: float) -> None:
        self.server.send_latency = seconds

    async def outage(self, down: bool) -> None:
        self.server.down = down
        if down:
            await self.server.drop()

    async def stop(self) -> None:
        await self.server.__aexit__(None, None, None)
        os.environ.pop(self.env, None)
        os.environ.pop(self.env + "_WRONG", None)
