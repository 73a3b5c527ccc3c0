"""Contract harness for the ``relay`` plugin channel against the relay platform emulator."""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.peers.relay_platform import RelayClient

_chats = itertools.count(1)


class RelayHarness:
    channel = "relay"
    account = "main"
    features = frozenset({"groups", "own_echo", "faults", "lost_response", "outage", "slow_send", "credentials"})

    @classmethod
    def create(cls, request: Any) -> RelayHarness:
        return cls(request.getfixturevalue("relay_peer").url)

    def __init__(self, peer_url: str) -> None:
        self.peer_url = peer_url
        self.token = f"tok-{uuid.uuid4().hex}"
        self.env = f"RELAY_TOKEN_{uuid.uuid4().hex[:8].upper()}"
        self.client = RelayClient(peer_url, self.token)
        self.bot_id = ""

    async def start(self, workdir: Path) -> None:
        self.bot_id = (await self.client.register())["bot_id"]
        os.environ[self.env] = self.token

    def gateway_config(self, data_dir: Path) -> Config:
        return self._config(data_dir, self.env)

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        wrong = f"tok-refused-{uuid.uuid4().hex}"
        os.environ[self.env + "_REFUSED"] = wrong
        return self._config(data_dir, self.env + "_REFUSED"), wrong

    def _config(self, data_dir: Path, env: str) -> Config:
        return parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: {
                "base_url": self.peer_url, "token": f"env:{env}", "poll_timeout": 2,
                "access": {"dm": "open", "group": "mention"},
            }}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    async def attach(self, gateway: Any) -> None:
        pass

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        user = f"u{next(_chats)}"
        chat = chat or (f"g{next(_chats)}" if group else user)
        result = await self.client.inject(chat, user, text, kind="group" if group else "direct", mention=mention)
        return Said(chat=chat, user=user, text=text, ref=result["update_id"])

    async def say_again(self, said: Said) -> None:
        await self.client.redeliver(said.ref)

    async def say_as_bot(self, text: str, *, chat: str) -> Said:
        result = await self.client.inject(chat, self.bot_id, text)
        return Said(chat=chat, user=self.bot_id, text=text, ref=result["update_id"])

    async def seen(self, chat: str) -> list[Seen]:
        messages = (await self.client.sent()).get(chat, [])
        return [Seen(id=str(m["message_id"]), text=m["text"], reply_to=str(m["reply_to"]) if m["reply_to"] else None)
                for m in messages]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        await self.client.faults(next=[str(status)], retry_after=retry_after)

    async def outage(self, down: bool) -> None:
        await self.client.faults(down=down)

    async def slow_sends(self, seconds: float) -> None:
        await self.client.faults(send_latency=seconds)

    async def rate_limited_sends(self) -> int:
        return (await self.client.attempts())["summary"].get("rate_limited", 0)

    async def send_requests(self) -> int:
        return len((await self.client.attempts())["attempts"])

    async def stop(self) -> None:
        os.environ.pop(self.env, None)
        os.environ.pop(self.env + "_REFUSED", None)
        await self.client.aclose()
