"""Contract harness for the ``msteams`` channel: a Teams bot on the Bot Framework emulator (tests/peers/msteams_server.py).

The emulator runs in-process on its own loopback port -- OpenID metadata,
keys, the token endpoint and the Bot Connector -- and posts signed activities
to the gateway's webhook once it runs.  Learners are personal (1:1) chats;
groups are group chats, where the bot answers an @-mention only.

Features: ``groups``, ``faults`` (the connector's 429 with Retry-After, 401,
503, 400 on the next message -- a send with no referrer goes by the stored
conversation reference, as a reminder does) and ``credentials`` (a client
secret Entra refuses).  Not ``lost_response``: the Bot Connector takes no
idempotency key (ADR 0022); not ``own_echo``: Teams does not echo a bot's posts.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Any, Self

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.contract.tencent_harness import TencentHarness
from tests.peers.msteams_server import TeamsPeer
from tests.peers.tencent_api import serving


class MsteamsHarness:
    channel = "msteams"
    account = "school"
    features = frozenset({"groups", "faults", "credentials"})

    @classmethod
    def create(cls, request: Any) -> Self:
        return cls()

    def __init__(self) -> None:
        self.peer = TeamsPeer()
        self.env = f"MSTEAMS_C_SECRET_{uuid.uuid4().hex[:8].upper()}"
        self._stack = contextlib.AsyncExitStack()
        self._users = 0

    async def start(self, workdir: Path) -> None:
        self.peer.base = await self._stack.enter_async_context(serving(self.peer))  # type: ignore[arg-type]

    def settings(self) -> dict[str, Any]:
        os.environ[self.env] = self.peer.secret
        return {"app_id": self.peer.app_id, "app_password": f"env:{self.env}", **self.peer.settings(),
                "access": {"dm": "open", "group": "mention"}}

    def gateway_config(self, data_dir: Path) -> Config:
        return parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: self.settings()}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        config = self.gateway_config(data_dir)
        refused = uuid.uuid4().hex
        os.environ[self.env] = refused
        return config, refused

    async def attach(self, gateway: Any) -> None:
        await TencentHarness.attach(self, gateway)  # type: ignore[arg-type]  # the same loopback webhook server

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        self._users += 1
        user = chat[3:] if chat and chat.startswith("a:1") else f"learner{self._users}"  # a 1:1 chat is its learner's
        chat = chat or (f"19:group{self._users}@thread.v2" if group else f"a:1{user}")
        activity = self.peer.activity(chat, user, text, kind="groupChat" if group else "personal", mention=mention)
        await self.peer.deliver(activity)
        return Said(chat=chat, user="29:" + user, text=text, ref=activity)

    async def say_again(self, said: Said) -> None:
        answer = await self.peer.post(said.ref)
        assert answer.status_code == 200, answer.text

    async def seen(self, chat: str) -> list[Seen]:
        return [Seen(id=s.id, text=s.text, reply_to=s.reply_to, attachments=s.attachments)
                for s in self.peer.seen_in(chat)]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        for _ in range(2 if status == 401 else 1):  # the one fresh token meets it again
            self.peer.fail_next(status, retry_after)

    async def rate_limited_sends(self) -> int:
        return self.peer.refused.count(429)

    async def send_requests(self) -> int:
        return self.peer.send_calls

    async def stop(self) -> None:
        await self._stack.aclose()
        os.environ.pop(self.env, None)
