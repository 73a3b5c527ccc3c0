"""Contract harness for the ``wecom`` channel against the AI-bot long-connection emulator (tests/peers/wecom_server.py).

wecom-aibot-sdk runs for real and dials the emulator over a loopback socket
(the account's ``ws_url``).  Features: ``outage`` (the emulator refuses every
connection and drops the open one, keeping what learners say for the next
subscribe) and ``slow_send`` (every reply acked late, after it is shown).

Left out, because the suite's expectation does not fit the platform:

- ``groups``: the suite's group test says something *without* mentioning the
  bot and expects the gateway to drop it; WeCom never hands the AI bot such a
  message, so there is nothing to drop.  tests/channels/wecom covers group
  @-messages (text and mixed).
- ``faults``: the long connection has no HTTP status -- WeCom refuses a reply
  with an errcode in the ack (45009, -1, 40001, 40058) and gives no retry
  hint, while the suite asserts the HTTP status in the error's text and a
  429's ``retry_after``.  :meth:`WecomHarness.fail_next_send` maps the statuses
  to WeCom's errcodes, and the retry tests pass with it; the translation test
  does not, by the platform's nature.  tests/channels/wecom/test_wecom_faults.py
  holds the same checks in WeCom's terms.
- ``credentials``: a probe that subscribes would take the bot's one long
  connection from the running account (WeCom keeps one per bot and closes the
  older), so the probe asks nothing; a refused secret shows when the account
  starts (tests/channels/wecom: the account waits for a human).
- ``lost_response``: WeCom takes no idempotency key for a reply or a push.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.peers.wecom_server import Said as WecomSaid
from tests.peers.wecom_server import WecomServer

ERRCODES: dict[int, tuple[int, str]] = {
    429: (45009, "api freq out of limit"),
    401: (40001, "invalid credential"),
    503: (-1, "system busy"),
    400: (40058, "invalid parameter"),
}
"""What WeCom answers in an ack body where an HTTP API would answer the suite's status."""


class WecomHarness:
    channel = "wecom"
    account = "school"
    features: frozenset[str] = frozenset({"outage", "slow_send"})

    @classmethod
    def create(cls, request: Any) -> WecomHarness:
        return cls()

    def __init__(self) -> None:
        self.server = WecomServer(bot_id=f"aib{uuid.uuid4().hex[:10]}", secret=uuid.uuid4().hex)
        self.env = f"WECOM_SECRET_{uuid.uuid4().hex[:8].upper()}"
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
                "mode": {"kind": "ai_bot", "bot_id": self.server.bot_id, "secret": f"env:{self.env}",
                         "ws_url": self.server.url},
                "access": {"dm": "open", "group": "mention"}}}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    async def attach(self, gateway: Any) -> None:
        await self.server.connected()

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        if group:
            raise NotImplementedError("the AI bot hears only @-messages in a group; feature groups is off")
        self._users += 1
        user = chat or f"learner{self._users}"
        said = await self.server.say(text, user=user)
        return Said(chat=user, user=user, text=text, ref=said)

    async def say_again(self, said: Said) -> None:
        assert isinstance(said.ref, WecomSaid)
        await self.server.redeliver(said.ref)

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        """The next reply or push is refused with the errcode WeCom answers for what ``status`` means; the long
        connection carries no HTTP status and WeCom no retry hint (``retry_after`` is not WeCom's to give)."""
        self.server.fail_next(*ERRCODES[status])

    async def rate_limited_sends(self) -> int:
        return self.server.refused.count(ERRCODES[429][0])

    async def send_requests(self) -> int:
        return self.server.send_requests

    async def outage(self, down: bool) -> None:
        await self.server.outage(down)

    async def slow_sends(self, seconds: float) -> None:
        self.server.ack_delay_s = seconds

    async def seen(self, chat: str) -> list[Seen]:
        return [Seen(id=s.id, text=s.content) for s in self.server.shown(chat)]

    async def stop(self) -> None:
        await self.server.__aexit__(None, None, None)
        os.environ.pop(self.env, None)
