"""Contract harness for the ``slack`` channel against the Slack emulator (tests/peers/slack_server.py), in Socket Mode.

Features: ``groups``, ``own_echo`` (Slack delivers the bot's own DM posts
back as ``message.im`` events), ``faults``, ``outage``, ``slow_send``,
``credentials``.  Left out: ``lost_response`` -- chat.postMessage takes no
idempotency key, so a post whose answer was lost cannot be told apart from one
that never arrived (ADR 0022 bounds the repeat to one per account).
"""

from __future__ import annotations

import itertools
import os
import random
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.peers.slack_peer import SlackUsers

_numbers = itertools.count(random.randrange(10**6, 10**7))


def seen_from(message: dict) -> Seen:
    attachments = [b["image_url"] for b in message.get("blocks") or [] if b.get("type") == "image"]
    attachments += [f["name"] for f in message.get("files") or []]
    text = message["text"] or "\n".join(b.get("text", {}).get("text", "") for b in message.get("blocks") or [])
    return Seen(id=message["ts"], text=text, reply_to=message.get("thread_ts"), attachments=tuple(attachments))


class SlackHarness:
    channel = "slack"
    account = "school"
    features = frozenset({"groups", "own_echo", "faults", "outage", "slow_send", "credentials"})

    @classmethod
    def create(cls, request: Any) -> SlackHarness:
        return cls(request.getfixturevalue("slack_api"))

    def __init__(self, url: str, *, mode: str = "socket") -> None:
        self.url, self.mode = url, mode
        self.users = SlackUsers(url)
        self.partner: dict[str, Any] = {}
        """Extra settings of the bound partner ``tutor`` (its ``languages``, say)."""
        tag = uuid.uuid4().hex[:8].upper()
        self.env = {"bot": f"SLACK_BOT_{tag}", "app": f"SLACK_APP_{tag}", "secret": f"SLACK_SECRET_{tag}"}

    async def start(self, workdir: Path) -> None:
        if not self.users.ids:
            await self.users.register()
        os.environ[self.env["bot"]] = self.users.token
        os.environ[self.env["app"]] = self.users.app_token
        os.environ[self.env["secret"]] = self.users.signing_secret

    def gateway_config(self, data_dir: Path, **settings: Any) -> Config:
        return self._config(data_dir, self.env["bot"], **settings)

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        unknown = f"xoxb-{uuid.uuid4().hex}"  # well shaped; no such app
        os.environ[self.env["bot"] + "_REFUSED"] = unknown
        return self._config(data_dir, self.env["bot"] + "_REFUSED"), unknown

    def _config(self, data_dir: Path, bot_env: str, **settings: Any) -> Config:
        account = {"bot_token": f"env:{bot_env}", "api_base": f"{self.url}/api/", "mode": self.mode,
                   "access": {"dm": "open", "group": "mention"}, **settings}
        account["app_token" if self.mode == "socket" else "signing_secret"] = \
            f"env:{self.env['app' if self.mode == 'socket' else 'secret']}"
        return parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor", **self.partner}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: account}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    async def attach(self, gateway: Any) -> None:
        pass

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False,
                  **options: Any) -> Said:
        user = f"U{next(_numbers)}"
        chat = chat or (f"C{next(_numbers)}" if group else f"D{next(_numbers)}")
        said = await self.users.say(chat, text, user=user, mention=mention, **options)
        return Said(chat=chat, user=user, text=text, ref=said["event_ids"][0])

    async def say_again(self, said: Said) -> None:
        await self.users.redeliver_event(said.ref)

    async def say_as_bot(self, text: str, *, chat: str) -> Said:
        ids = self.users.ids
        ts = f"{random.randrange(10**9, 2 * 10**9)}.000100"
        event_id = await self.users.event({"type": "message", "channel": chat, "user": ids["bot_user"],
                                           "bot_id": ids["bot_id"], "text": text, "ts": ts, "channel_type": "im"})
        return Said(chat=chat, user=ids["bot_user"], text=text, ref=event_id)

    async def seen(self, chat: str) -> list[Seen]:
        return [seen_from(m) for m in (await self.users.seen()).get(chat, [])]

    async def fail_next_send(self, status: int | str, retry_after: float = 1.0) -> None:
        await self.users.faults(next=[str(status)], retry_after=retry_after)

    async def rate_limited_sends(self) -> int:
        return (await self.users.app())["rate_limited"]

    async def send_requests(self) -> int:
        return sum(1 for c in (await self.users.app())["calls"] if c["method"] == "chat.postMessage")

    async def outage(self, down: bool) -> None:
        await self.users.faults(down=down)

    async def slow_sends(self, seconds: float) -> None:
        await self.users.faults(send_latency=seconds)

    async def stop(self) -> None:
        for name in self.env.values():
            os.environ.pop(name, None)
        os.environ.pop(self.env["bot"] + "_REFUSED", None)
        await self.users.aclose()
