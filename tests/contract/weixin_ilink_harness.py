"""Contract harness for ``weixin`` with ``kind: ilink`` (personal WeChat), against the iLink emulator.

The emulator (tests/peers/weixin_ilink_server.py) runs in-process on its own
loopback port.  The account is logged in by QR code in ``start``, into the
store of the data dir the suite's gateway will use, before the gateway runs;
the gateway long-polls the emulator and answers through ``sendmessage``.

Features: ``fetches_media`` -- a file goes to the platform's CDN as bytes, so a
reply's image by URL is fetched by the gateway; the harness serves it from
the emulator's loopback port and names a file the learner received by the
URL whose bytes it has.  ``faults``: the suite's statuses are answered to
``sendmessage`` as HTTP statuses (a 429 with ``Retry-After``), which is how
the iLink front end refuses a call; the platform's own ``ret`` codes in 200s
(-14 session expired, -2 stale context token) are tests/channels/weixin's.
``outage``: every bot call answers 503 while the platform is away, and the
long poll's retries run out into a restart.  ``slow_send``: ``sendmessage``
answers late.

Not declared: ``groups`` -- the bot is reached 1:1 (``group_id`` appears in
the protocol's message, but the ClawBot plugin speaks in direct chats only,
and the emulator has none); ``own_echo`` -- the bot's own messages are marked
by the platform and not served back by the emulator; ``lost_response`` --
``sendmessage`` takes a ``client_id``, but nothing published says the
platform drops a second message with the same one, so a retried send after a
lost answer may show twice (the channel cannot know better).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.channels.weixin.ilink_rig import IlinkRig, log_in
from tests.contract.harness import Said, Seen
from tests.peers.weixin_ilink_server import IlinkPeer, serving


class IlinkHarness:
    channel = "weixin"
    account = "school"
    features: frozenset[str] = frozenset({"fetches_media", "faults", "outage", "slow_send"})

    @classmethod
    def create(cls, request: Any) -> IlinkHarness:
        return cls()

    def __init__(self) -> None:
        self.peer = IlinkPeer()
        self._stack = contextlib.AsyncExitStack()
        self.base = ""
        self._learners = 0

    def _raw(self, data_dir: Path) -> dict[str, Any]:
        return {
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: {"base_url": self.base, "cdn_base_url": self.base + "c2c/",
                                                         "poll_timeout_s": 1, "access": {"dm": "open"}}}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        }

    async def start(self, workdir: Path) -> None:
        self.base = await self._stack.enter_async_context(serving(self.peer))
        await log_in(IlinkRig(self.peer, self._raw(workdir / "data"), None))

    def gateway_config(self, data_dir: Path) -> Config:
        return parse_config(self._raw(data_dir))

    async def attach(self, gateway: Any) -> None:
        """Nothing to wire: the gateway polls the emulator."""

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        if chat is None:
            self._learners += 1
            chat = f"learner-{self._learners}@im.wechat"
        ident = await self.peer.say(chat, text)
        return Said(chat=chat, user=chat, text=text, ref=ident)

    async def say_again(self, said: Said) -> None:
        await self.peer.say_again(str(said.ref))

    async def media_url(self, name: str) -> str:
        self.peer.files[name] = b"\x89PNG\r\n\x1a\n" + name.encode() * 64
        return f"{self.base}_test/files/{name}"

    async def seen(self, chat: str) -> list[Seen]:
        by_bytes = {data: f"{self.base}_test/files/{name}" for name, data in self.peer.files.items()}
        return [Seen(id=s.client_id, text=s.text, attachments=(by_bytes.get(s.data, f"<{len(s.data)} other bytes>"),)
                     if s.kind != "text" else ()) for s in self.peer.sent if s.to == chat]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        headers = {"Retry-After": f"{retry_after:g}"} if status == 429 else {}
        self.peer.fail_next_send(status, {"errmsg": f"refused with HTTP {status}"}, headers)  # a front end's: no ret

    async def rate_limited_sends(self) -> int:
        return self.peer.send_statuses.count(429)

    async def send_requests(self) -> int:
        return len(self.peer.send_statuses)

    async def outage(self, down: bool) -> None:
        self.peer.down = down

    async def slow_sends(self, seconds: float) -> None:
        self.peer.send_latency_s = seconds

    async def stop(self) -> None:
        await self._stack.aclose()
