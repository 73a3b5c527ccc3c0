"""Contract harness for the ``whatsapp`` channel: a business number on the Cloud API emulator (tests/peers/whatsapp_server.py).

The emulator serves Meta's Graph on its own loopback port; once the gateway
runs, its HTTP app is served on another and the emulator posts signed webhooks
there.  Learners are one-to-one chats named by their ``wa_id``.

Features: ``faults`` with ``errcodes`` (the next send answered with the status
and Meta's code for it: 429 with 130429, 401 with 190, 503 as 500 with 131000,
400 with 100; Meta names no wait for a rate limit),
``credentials`` (a token Meta refuses, 190) and ``fetches_media`` (a reply's
file is uploaded by its bytes).  Not ``lost_response``: the Cloud API takes no
idempotency key (ADR 0049); not ``groups``: the Cloud API has none.
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
from tests.e2e.rig import served
from tests.peers.tencent_api import serving
from tests.peers.whatsapp_server import VERSION, WhatsappPeer

CODES = {429: 130429, 401: 190, 503: 131000, 400: 100}


class WhatsappHarness:
    channel = "whatsapp"
    account = "school"
    features = frozenset({"faults", "errcodes", "credentials", "fetches_media"})

    @classmethod
    def create(cls, request: Any) -> Self:
        return cls()

    def __init__(self) -> None:
        self.peer = WhatsappPeer()
        tag = uuid.uuid4().hex[:8].upper()
        self.env = {name: f"WHATSAPP_C_{name.upper()}_{tag}" for name in ("token", "secret", "verify")}
        self.verify_token = uuid.uuid4().hex
        self._stack = contextlib.AsyncExitStack()
        self._users = 0

    def settings(self) -> dict[str, Any]:
        os.environ[self.env["token"]] = self.peer.token
        os.environ[self.env["secret"]] = self.peer.app_secret
        os.environ[self.env["verify"]] = self.verify_token
        return {"phone_number_id": self.peer.phone_number_id, "access_token": f"env:{self.env['token']}",
                "app_secret": f"env:{self.env['secret']}", "verify_token": f"env:{self.env['verify']}",
                "graph_base": self.peer.base.rstrip("/"), "api_version": VERSION, "access": {"dm": "open"}}

    async def start(self, workdir: Path) -> None:
        self.peer.base = await self._stack.enter_async_context(serving(self.peer))  # type: ignore[arg-type]

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
        refused = "EAAG" + uuid.uuid4().hex
        os.environ[self.env["token"]] = refused
        return config, refused

    async def attach(self, gateway: Any) -> None:
        url = await self._stack.enter_async_context(served(gateway))
        self.peer.callback_url = f"{url}/webhooks/{self.channel}/{self.account}"

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        if chat is None:
            self._users += 1
            chat = f"1555010{self._users:04d}"
        wamid = await self.peer.say(chat, text)
        return Said(chat=chat, user=chat, text=text, ref=wamid)

    async def say_again(self, said: Said) -> None:
        await self.peer.say(said.chat, said.text, wamid=str(said.ref))

    async def seen(self, chat: str) -> list[Seen]:
        by_bytes = {data: f"{self.peer.base}_test/files/{name}" for name, data in self.peer.files.items()}
        return [Seen(id=s.id, text=s.text, attachments=(by_bytes.get(s.data, f"<{len(s.data)} other bytes>"),)
                     if s.data else ()) for s in self.peer.shown if s.to == chat]

    async def media_url(self, name: str) -> str:
        self.peer.files[name] = b"\x89PNG\r\n\x1a\n" + name.encode() * 64
        return f"{self.peer.base}_test/files/{name}"

    def errcode(self, status: int) -> int:
        return CODES[status]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self.peer.fail_next(500 if status == 503 else status, CODES[status])

    async def rate_limited_sends(self) -> int:
        return self.peer.refused.count(CODES[429])

    async def send_requests(self) -> int:
        return self.peer.send_calls

    async def stop(self) -> None:
        await self._stack.aclose()
        for name in self.env.values():
            os.environ.pop(name, None)
