"""Contract harness for the ``telegram`` channel against the Bot API emulator (tests/peers/telegram_server.py).

Features: ``groups``, ``faults``, ``outage``, ``slow_send``.  Left out:
``own_echo`` -- Telegram never delivers a bot's own messages to it -- and
``lost_response`` -- Telegram takes no idempotency key, so a send whose
answer was lost cannot be told apart from one that never arrived (see
docs/adr/0010-telegram-channel.md).

The bot runs with privacy mode off, as a teacher sets it with BotFather's
``/setprivacy`` when the partner should see a whole class group: the suite's
group test needs the unaddressed message delivered so the gateway can drop it.
Privacy mode on is tested in tests/channels/telegram.
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
from tests.peers.telegram_peer import TelegramUsers

_numbers = itertools.count(1)
_BASE = random.randrange(10**6, 10**9)
"""Chat and user ids are global in the emulator; a random base keeps sessions' harnesses apart."""


def seen_from(message: dict) -> Seen:
    import html

    text = message["html"] if message["parse_mode"] == "HTML" else html.escape(message["text"], quote=False)
    return Seen(id=str(message["message_id"]), text=text,
                reply_to=str(message["reply_to"]) if message["reply_to"] else None,
                attachments=(message["attachment"],) if message["attachment"] else ())


class TelegramHarness:
    channel = "telegram"
    account = "main"
    features = frozenset({"groups", "faults", "outage", "slow_send", "credentials"})

    @classmethod
    def create(cls, request: Any) -> TelegramHarness:
        return cls(request.getfixturevalue("telegram_api"))

    def __init__(self, api_url: str) -> None:
        self.api_url = api_url
        self.token = f"{random.randrange(10**8, 10**9)}:{uuid.uuid4().hex}"
        self.env = f"TELEGRAM_TOKEN_{uuid.uuid4().hex[:8].upper()}"
        self.users = TelegramUsers(api_url, self.token)

    async def start(self, workdir: Path) -> None:
        await self.users.register(privacy=False)
        os.environ[self.env] = self.token

    def gateway_config(self, data_dir: Path) -> Config:
        return self._config(data_dir, self.env)

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        unknown = f"{random.randrange(10**8, 10**9)}:{uuid.uuid4().hex}"  # well shaped; no such bot
        os.environ[self.env + "_REFUSED"] = unknown
        return self._config(data_dir, self.env + "_REFUSED"), unknown

    def _config(self, data_dir: Path, env: str) -> Config:
        return parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: {
                "token": f"env:{env}", "api_url": self.api_url, "poll_timeout": 2,
                "access": {"dm": "open", "group": "mention"},
            }}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    async def attach(self, gateway: Any) -> None:
        pass

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        user = _BASE + next(_numbers)
        if chat is None:
            chat = str(-(10**12 + _BASE + next(_numbers))) if group else str(user)
        kind = "private" if int(chat) > 0 else "supergroup"
        result = await self.users.say({"id": int(chat), "type": kind}, text, user={"id": user}, mention=mention)
        return Said(chat=chat, user=str(user), text=text, ref=result["update_id"])

    async def say_again(self, said: Said) -> None:
        await self.users.redeliver(said.ref)

    async def say_as_bot(self, text: str, *, chat: str) -> Said:
        raise AssertionError("Telegram does not deliver a bot's own messages; own_echo is not a feature here")

    async def seen(self, chat: str) -> list[Seen]:
        return [seen_from(m) for m in (await self.users.seen()).get(chat, [])]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        await self.users.faults(next=[str(status)], retry_after=retry_after)

    async def rate_limited_sends(self) -> int:
        return (await self.users.attempts())["summary"].get("rate_limited", 0)

    async def send_requests(self) -> int:
        return len((await self.users.attempts())["attempts"])

    async def outage(self, down: bool) -> None:
        await self.users.faults(down=down)

    async def slow_sends(self, seconds: float) -> None:
        await self.users.faults(send_latency=seconds)

    async def stop(self) -> None:
        os.environ.pop(self.env, None)
        os.environ.pop(self.env + "_REFUSED", None)
        await self.users.aclose()
