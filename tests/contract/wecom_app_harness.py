"""Contract harness for the ``wecom`` channel's self-built app (``kind: app``), against the WeCom app emulator.

The emulator (tests/peers/wecom_app_server.py) runs in-process on its own
loopback port; the gateway's HTTP app is served on another once the gateway
runs (``attach``), and the emulator posts its encrypted callbacks there.
Every answer is an app message the emulator records in order -- what the
member's chat shows.

Features: ``credentials`` (a corpsecret WeCom refuses, 40001).  The app talks
1:1 (no ``groups``), WeCom never delivers the app's own messages (no
``own_echo``), and the emulator's faults are WeCom's own errcodes, not the
suite's HTTP statuses (tests/channels/wecom/test_wecom_app.py covers 42001 and 45009).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.channels.wecom.app_rig import app_settings
from tests.contract.harness import Said, Seen
from tests.peers.wecom_app_server import WecomApp, serving
from tests.waits import HANG_S


class WecomAppHarness:
    channel = "wecom"
    account = "school"
    features = frozenset({"credentials"})

    @classmethod
    def create(cls, request: Any) -> WecomAppHarness:
        return cls()

    def __init__(self) -> None:
        self.peer = WecomApp()
        tag = uuid.uuid4().hex[:8].upper()
        self.env = {name: f"WECOM_APP_C_{name.upper()}_{tag}" for name in ("secret", "token", "key")}
        self._stack = contextlib.AsyncExitStack()
        self.api = ""
        self._learners = 0

    async def start(self, workdir: Path) -> None:
        self.api = await self._stack.enter_async_context(serving(self.peer))

    def gateway_config(self, data_dir: Path) -> Config:
        settings = app_settings(self.peer, self.api, self.env)
        return parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: settings}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        config = self.gateway_config(data_dir)
        refused = uuid.uuid4().hex  # well shaped; not this account's
        os.environ[self.env["secret"]] = refused
        return config, refused

    async def attach(self, gateway: Any) -> None:
        from gateway.http.app import build_app
        from gateway.http.server import serve_http

        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(serve_http(build_app(gateway), "127.0.0.1", 0, on_ready=ready.set_result,
                                                shutdown_timeout=1))

        async def stop_server() -> None:
            server.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await server

        self._stack.push_async_callback(stop_server)
        url = await asyncio.wait_for(ready, HANG_S)
        self.peer.callback_url = f"{url}/webhooks/{self.channel}/{self.account}"

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        if chat is None:
            self._learners += 1
            chat = f"member{self._learners}"
        msg_id = await self.peer.say(chat, text)
        return Said(chat=chat, user=chat, text=text, ref=msg_id)

    async def say_again(self, said: Said) -> None:
        plain = self.peer.message(said.chat, said.text, msg_id=str(said.ref))
        answer = await self.peer.post(*self.peer.envelope(plain))
        assert answer.status_code == 200, answer.text

    async def seen(self, chat: str) -> list[Seen]:
        shown = []
        for i, message in enumerate(m for m in self.peer.sent if m["touser"] == chat):
            if message["msgtype"] == "news":  # a file known by its URL: a card showing it
                [article] = message["news"]["articles"]
                picture = (article["picurl"],) if article.get("picurl") else ()
                shown.append(Seen(id=f"{chat}:{i}", text=article["title"], attachments=picture or (article["url"],)))
            elif message["msgtype"] == "text":
                shown.append(Seen(id=f"{chat}:{i}", text=message["text"]["content"]))
            else:
                shown.append(Seen(id=f"{chat}:{i}", text="", attachments=(message[message["msgtype"]]["media_id"],)))
        return shown

    async def stop(self) -> None:
        await self._stack.aclose()
        for name in self.env.values():
            os.environ.pop(name, None)
