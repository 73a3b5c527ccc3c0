"""Contract harness for the ``feishu`` channel against the emulator (tests/peers/feishu_server.py).

lark-oapi's long connection runs for real and dials the emulator over a loopback socket (the account's
``domain``); the REST half is the channel's httpx.  Replies are unstreamed (``stream: false``) so what a
learner sees is one rich-text message per part; tests/channels/feishu covers the CardKit cards.
Features left out, and why: ``faults`` (Feishu's stale-token code is fetched again once before it is
``AuthFailed``, which the suite's one-fault 401 does not model; tests/channels/feishu covers the codes),
``own_echo`` (Feishu does not deliver the bot's own messages), ``outage``, ``lost_response``, ``slow_send``.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.peers.feishu_server import FeishuServer
from tests.peers.feishu_server import Said as FeishuSaid


class FeishuHarness:
    channel = "feishu"
    account = "school"
    features: frozenset[str] = frozenset({"groups"})

    @classmethod
    def create(cls, request: Any) -> FeishuHarness:
        return cls()

    def __init__(self) -> None:
        self.server = FeishuServer()
        self.env = f"FEISHU_SECRET_{uuid.uuid4().hex[:8].upper()}"
        self._users = 0

    async def start(self, workdir: Path) -> None:
        await self.server.__aenter__()
        os.environ[self.env] = self.server.secret

    def gateway_config(self, data_dir: Path) -> Config:
        return parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: {
                "app_id": self.server.app_id, "app_secret": f"env:{self.env}", "domain": self.server.url,
                "stream": False, "access": {"dm": "open", "group": "mention"}}}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    async def attach(self, gateway: Any) -> None:
        await self.server.connected()

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        self._users += 1
        user = f"ou_learner{self._users}"
        said = await self.server.say(text, user=user, chat=chat or (f"oc_group{self._users}" if group else None),
                                     group=group, mention=mention)
        return Said(chat=said.chat, user=user, text=text, ref=said)

    async def say_again(self, said: Said) -> None:
        assert isinstance(said.ref, FeishuSaid)
        await self.server.redeliver(said.ref)

    async def seen(self, chat: str) -> list[Seen]:
        def links(s: Any) -> tuple[str, ...]:
            tags = [t for para in s.content.get("zh_cn", {}).get("content", []) for t in para] if s.msg_type == "post" else []
            return tuple(t["href"] for t in tags if t.get("tag") == "a")

        return [Seen(id=s.id, text=self.server.text_of(s), reply_to=s.reply_to, attachments=links(s))
                for s in self.server.shown(chat)]

    async def stop(self) -> None:
        await self.server.__aexit__(None, None, None)
        os.environ.pop(self.env, None)
