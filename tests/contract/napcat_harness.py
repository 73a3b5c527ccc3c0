"""Contract harness for the ``napcat`` channel (forward websocket) against the OneBot emulator (tests/peers/napcat_server.py).

The channel dials the emulator with its access token over a loopback socket.
Features left out, and why:

- ``faults``, ``lost_response``, ``slow_send``: a OneBot action has no HTTP
  status; failed retcodes and their translation are in tests/channels/napcat.
- ``outage``: OneBot keeps nothing for a bot that is away, so "recovers without
  losing messages" is not a promise this platform lets the gateway make.

Reverse mode (NapCat dials the gateway) is driven in tests/channels/napcat/test_napcat_reverse.py
against a real gateway HTTP server.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.peers.napcat_server import GROUP_PREFIX, NapcatServer
from tests.peers.napcat_server import Said as NapcatSaid

MEDIA_SEGMENTS = ("image", "record", "video", "file")


class NapcatHarness:
    channel = "napcat"
    account = "qq"
    features: frozenset[str] = frozenset({"groups", "own_echo", "credentials"})

    @classmethod
    def create(cls, request: Any) -> NapcatHarness:
        return cls()

    def __init__(self) -> None:
        self.server = NapcatServer(token=uuid.uuid4().hex)
        self.env = f"NAPCAT_TOKEN_{uuid.uuid4().hex[:8].upper()}"
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
                "i_understand_the_ban_risk": True, "ws_url": self.server.url, "access_token": f"env:{env}",
                "self_id": str(self.server.self_id), "access": {"dm": "open", "group": "mention"}}}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    def gateway_config(self, data_dir: Path) -> Config:
        return self._config(data_dir, self.env)

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        wrong = uuid.uuid4().hex
        os.environ[self.env + "_WRONG"] = wrong
        return self._config(data_dir, self.env + "_WRONG"), wrong

    async def attach(self, gateway: Any) -> None:
        await self.server.connected()

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        self._users += 1
        user = 20000 + self._users
        if group:
            group_id = int(chat[len(GROUP_PREFIX):]) if chat else 800000 + self._users
            said = await self.server.say(text, user=user, group=group_id, mention=mention)
            return Said(chat=f"{GROUP_PREFIX}{group_id}", user=str(user), text=text, ref=said)
        user = int(chat) if chat else user
        said = await self.server.say(text, user=user)
        return Said(chat=str(user), user=str(user), text=text, ref=said)

    async def say_again(self, said: Said) -> None:
        assert isinstance(said.ref, NapcatSaid)
        await self.server.redeliver(said.ref)

    async def say_as_bot(self, text: str, *, chat: str) -> Said:
        # NapCat reports the bot's own messages (message_sent) -- its reply, then one typed on the account
        for shown in self.server.shown(chat):
            await self.server.say(shown.text, user=int(chat), sent=True)
        said = await self.server.say(text, user=int(chat), sent=True)
        return Said(chat=chat, user=str(self.server.self_id), text=text, ref=said)

    async def seen(self, chat: str) -> list[Seen]:
        return [Seen(id=str(s.message_id), text=s.text, reply_to=s.reply_to,
                     attachments=tuple(str(g["data"]["file"]) for g in s.segments if g.get("type") in MEDIA_SEGMENTS))
                for s in self.server.shown(chat)]

    async def stop(self) -> None:
        await self.server.__aexit__(None, None, None)
        os.environ.pop(self.env, None)
        os.environ.pop(self.env + "_WRONG", None)
