"""Contract harness for the ``discord`` channel against the Gateway + REST emulator (tests/peers/discord_server.py).

discord.py runs for real and reaches the emulator over loopback sockets through
the account's ``api_base`` and ``gateway_url``.  Features: ``groups`` (a fresh
guild text channel per conversation, mention addressing), ``own_echo`` (Discord
dispatches the bot's own posts to it), ``faults``, ``lost_response`` (sends carry
a nonce with ``enforce_nonce``, which Discord deduplicates), ``slow_send`` and
``credentials``.  Left out: ``outage`` -- the suite's outage test expects the
account to be restarted, while discord.py resumes the same session and the
account reports ``error`` until it is back; tests/channels/discord covers that.
"""

from __future__ import annotations

import base64
import os
import random
import secrets
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen, eventually
from tests.peers.discord_server import DiscordPeer


def new_token() -> str:
    """A token shaped like Discord's: base64 of the bot id, a timestamp part, an HMAC part."""
    head = base64.b64encode(str(random.randrange(10**17, 10**18)).encode()).decode().rstrip("=")
    return f"{head}.{secrets.token_urlsafe(5)[:6]}.{secrets.token_urlsafe(27)}"


def seen_from(message: dict) -> Seen:
    reference = message.get("message_reference") or {}
    media = [e["image"]["url"] for e in message.get("embeds", []) if isinstance(e.get("image"), dict)]
    media += [a["url"] for a in message.get("attachments", [])]
    return Seen(id=message["id"], text=message["content"], reply_to=reference.get("message_id"), attachments=tuple(media))


class DiscordHarness:
    channel = "discord"
    account = "main"
    features = frozenset({"groups", "own_echo", "faults", "lost_response", "slow_send", "credentials"})

    @classmethod
    def create(cls, request: Any) -> DiscordHarness:
        return cls()

    def __init__(self, **peer_options: Any) -> None:
        self.token = new_token()
        self.env = f"DISCORD_TOKEN_{uuid.uuid4().hex[:8].upper()}"
        self.peer = DiscordPeer(token=self.token, **peer_options)
        self.by_hand: set[str] = set()
        """Messages the test posted as the bot's account: not the gateway's answers."""

    async def start(self, workdir: Path) -> None:
        await self.peer.start()
        os.environ[self.env] = self.token

    def settings(self, env: str | None = None, **extra: Any) -> dict:
        return {"token": f"env:{env or self.env}", "api_base": self.peer.api_base, "gateway_url": self.peer.gateway_url,
                "access": {"dm": "open", "group": "mention"}, **extra}

    def raw_config(self, data_dir: Path, env: str | None = None, **extra: Any) -> dict:
        return {
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: self.settings(env, **extra)}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        }

    def gateway_config(self, data_dir: Path) -> Config:
        return parse_config(self.raw_config(data_dir))

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        unknown = new_token()
        os.environ[self.env + "_REFUSED"] = unknown
        return parse_config(self.raw_config(data_dir, self.env + "_REFUSED")), unknown

    async def attach(self, gateway: Any) -> None:
        """Discord delivers nothing said before the bot's session exists: wait until it has identified."""
        await eventually(self.peer.connected, what="the bot to connect to the Gateway")

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        if chat is None and group:
            chat = await self.peer.new_channel()
        message = await self.peer.say(text, channel=chat, mention=mention)
        return Said(chat=message["channel_id"], user=message["author"]["id"], text=text, ref=message)

    async def say_again(self, said: Said) -> None:
        await self.peer.redeliver(said.ref)

    async def say_as_bot(self, text: str, *, chat: str) -> Said:
        message = await self.peer.say_as_bot(text, channel=chat)
        self.by_hand.add(message["id"])
        return Said(chat=chat, user=self.peer.app_id, text=text, ref=message)

    async def seen(self, chat: str) -> list[Seen]:
        return [seen_from(m) for m in self.peer.seen(chat) if m["id"] not in self.by_hand]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self.peer.fail_next(status, retry_after=retry_after)

    async def rate_limited_sends(self) -> int:
        return self.peer.rate_limited()

    async def send_requests(self) -> int:
        return sum(1 for r in self.peer.requests if r["method"] == "POST" and r["route"] == "channels/{id}/messages")

    async def outage(self, down: bool) -> None:
        await self.peer.outage(down)

    async def slow_sends(self, seconds: float) -> None:
        self.peer.send_latency = seconds

    async def stop(self) -> None:
        os.environ.pop(self.env, None)
        os.environ.pop(self.env + "_REFUSED", None)
        await self.peer.stop()
