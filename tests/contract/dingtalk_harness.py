"""Contract harness for the ``dingtalk`` channel against the Stream-mode emulator (tests/peers/dingtalk_server.py).

The ticket is got through the real dingtalk-stream SDK and the stream runs on the
kit's websocket session over a loopback socket (the account's ``api_base``).  The
account names an AI card template, so the suite drives the native stream (cards);
the Markdown path (session webhook, robot API) is covered in tests/channels/dingtalk.
Features left out, and why:

- ``groups``: the suite's group test says something *without* mentioning the bot
  and expects the gateway to drop it; DingTalk hands the robot only its group
  @-messages, so there is nothing to drop.  tests/channels/dingtalk covers groups.
- ``faults``, ``outage``, ``lost_response``, ``slow_send``: answers go through the
  learner's session webhook, which has no status to fail with but its errcode; the
  webhook's refusal and the robot API's fallback are in tests/channels/dingtalk.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.peers.dingtalk_server import DingtalkServer
from tests.peers.dingtalk_server import Said as DingtalkSaid


class DingtalkHarness:
    channel = "dingtalk"
    account = "school"
    features: frozenset[str] = frozenset({"credentials"})

    @classmethod
    def create(cls, request: Any) -> DingtalkHarness:
        return cls()

    def __init__(self) -> None:
        self.server = DingtalkServer(client_id=f"ding{uuid.uuid4().hex[:10]}", secret=uuid.uuid4().hex)
        self.env = f"DINGTALK_SECRET_{uuid.uuid4().hex[:8].upper()}"
        self._users = 0

    async def start(self, workdir: Path) -> None:
        await self.server.__aenter__()
        os.environ[self.env] = self.server.secret

    def _config(self, data_dir: Path, env: str) -> Config:
        return parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: {
                "client_id": self.server.client_id, "client_secret": f"env:{env}", "api_base": self.server.url,
                "card_template_id": "tpl-contract.schema",  # answers stream into AI cards: the richer path
                "access": {"dm": "open", "group": "mention"}}}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    def gateway_config(self, data_dir: Path) -> Config:
        return self._config(data_dir, self.env)

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        wrong, env = uuid.uuid4().hex, f"DINGTALK_WRONG_{uuid.uuid4().hex[:8].upper()}"
        os.environ[env] = wrong
        return self._config(data_dir, env), wrong

    async def attach(self, gateway: Any) -> None:
        await self.server.connected()

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        if group:
            raise NotImplementedError("the robot hears only @-messages in a group; feature groups is off")
        self._users += 1
        user = chat or f"learner{self._users}"
        said = await self.server.say(text, user=user)
        return Said(chat=user, user=user, text=text, ref=said)

    async def say_again(self, said: Said) -> None:
        assert isinstance(said.ref, DingtalkSaid)
        await self.server.redeliver(said.ref)

    async def seen(self, chat: str) -> list[Seen]:
        return [Seen(id=s.id, text=s.text) for s in self.server.in_chat(chat)]

    async def stop(self) -> None:
        await self.server.__aexit__(None, None, None)
        os.environ.pop(self.env, None)
