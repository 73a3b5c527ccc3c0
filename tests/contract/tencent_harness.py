"""What the contract harnesses of Tencent's callback platforms share: a ``cgi-bin`` emulator and a gateway it posts to.

The emulator (a :class:`~tests.peers.tencent_api.TencentPeer`) runs in-process
on its own loopback port; the gateway's HTTP app is served on another once the
gateway runs (``attach``), and the emulator posts its callbacks there.  Every
answer is a message the emulator records in order -- what the chat shows.

A platform's harness names its channel, makes its peer and says what its
account's settings are (:meth:`TencentHarness.settings`); the peer's secrets
reach the gateway through environment variables named per harness, so two
harnesses never read each other's.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Any, ClassVar, Self

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.e2e.rig import served
from tests.peers.tencent_api import TencentPeer, serving


class TencentHarness:
    channel: ClassVar[str]
    account = "school"
    features = frozenset({"credentials"})
    env_prefix: ClassVar[str]
    """Where the names of this harness's environment variables start (``WEIXIN_C``)."""
    chat_prefix: ClassVar[str]
    """What the emulator's users are called, numbered (``member`` -> ``member1``)."""

    @classmethod
    def create(cls, request: Any) -> Self:
        return cls()

    def __init__(self, peer: TencentPeer) -> None:
        self.peer = peer
        tag = uuid.uuid4().hex[:8].upper()
        self.env = {name: f"{self.env_prefix}_{name.upper()}_{tag}" for name in ("secret", "token", "key")}
        self._stack = contextlib.AsyncExitStack()
        self.api = ""
        self._users = 0

    ERRCODES: ClassVar[dict[int, int]] = {429: 45009, 401: 40001, 503: -1, 400: 45002}
    """Feature ``errcodes``: the suite's HTTP status -> the errcode WeChat and WeCom answer in a 200 for it."""

    def errcode(self, status: int) -> int:
        return self.ERRCODES[status]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        for _ in range(2 if self.ERRCODES[status] == 40001 else 1):  # the kit's one fresh token meets it again
            self.peer.fail_next(self.ERRCODES[status])

    async def rate_limited_sends(self) -> int:
        return self.peer.refused.count(self.ERRCODES[429])

    async def send_requests(self) -> int:
        return self.peer.send_calls

    def settings(self) -> dict[str, Any]:
        """The account's settings, the peer's secrets written to :attr:`env`."""
        raise NotImplementedError

    async def start(self, workdir: Path) -> None:
        self.api = await self._stack.enter_async_context(serving(self.peer))

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
        refused = uuid.uuid4().hex  # well shaped; not this account's
        os.environ[self.env["secret"]] = refused
        return config, refused

    async def attach(self, gateway: Any) -> None:
        url = await self._stack.enter_async_context(served(gateway))
        self.peer.callback_url = f"{url}/webhooks/{self.channel}/{self.account}"

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        if chat is None:
            self._users += 1
            chat = f"{self.chat_prefix}{self._users}"
        msg_id = await self.peer.say(chat, text)
        return Said(chat=chat, user=chat, text=text, ref=msg_id)

    async def say_again(self, said: Said) -> None:
        plain = self.peer.message(said.chat, said.text, msg_id=str(said.ref))
        answer = await self.peer.post(*self.peer.envelope(plain))
        assert answer.status_code == 200, answer.text

    async def seen(self, chat: str) -> list[Seen]:
        return [Seen(id=f"{chat}:{i}", text=text) for i, text in enumerate(self.peer.texts_to(chat))]

    async def stop(self) -> None:
        await self._stack.aclose()
        for name in self.env.values():
            os.environ.pop(name, None)
