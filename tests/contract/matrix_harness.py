"""Contract harness for the Matrix channel against a real Synapse, behind the fault proxy.

The gateway's bot talks to Synapse through :class:`MatrixFaultProxy` (so the
suite can inject 429/401/503/400, lost responses, slow sends, an outage and a
redelivered /sync answer); the learners talk to Synapse directly.  Each test
gets its own bot account.  A direct chat is a room a learner creates with the
bot invited (``is_direct``); a group is a room with the learner, a classmate
and the bot; a mention is ``m.mentions`` plus the bot's name in the body.
``seen`` reads the room as the learner and applies ``m.replace`` edits, one
entry per original bot event.
"""

from __future__ import annotations

import itertools
import os
import uuid
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.peers.matrix_client import MatrixUser, shown_messages
from tests.peers.matrix_proxy import MatrixFaultProxy
from tests.peers.synapse import SynapsePeer

_ids = itertools.count(1)


class MatrixHarness:
    channel = "matrix"
    account = "main"
    features = frozenset({"groups", "own_echo", "faults", "lost_response", "outage", "slow_send", "credentials"})

    @classmethod
    def create(cls, request: Any) -> MatrixHarness:
        return cls(request.getfixturevalue("synapse"))

    def __init__(self, peer: SynapsePeer) -> None:
        self.peer = peer
        self.tag = uuid.uuid4().hex[:8]
        self.env = f"MATRIX_TOKEN_{self.tag.upper()}"
        self.bot = peer.register(f"tutor-{self.tag}")
        self.proxy = MatrixFaultProxy(peer.url)
        self.users: list[MatrixUser] = []
        self.owner: dict[str, MatrixUser] = {}
        """room -> the learner who made it (and speaks in it)."""
        self.by_hand: set[str] = set()
        """Events the harness itself posted as the bot: not replies, so ``seen`` leaves them out."""

    def new_user(self, name: str) -> MatrixUser:
        user = MatrixUser(self.peer.url, self.peer.register(f"{name}-{self.tag}-{next(_ids)}"))
        self.users.append(user)
        return user

    async def start(self, workdir: Path) -> None:
        await self.proxy.start()
        os.environ[self.env] = self.bot.access_token
        bot = MatrixUser(self.peer.url, self.bot)
        self.users.append(bot)
        await bot.set_displayname("Tutor")

    def gateway_config(self, data_dir: Path) -> Config:
        return parse_config(self.raw_config(data_dir))

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        wrong = f"syt_not_a_token_{uuid.uuid4().hex}"
        os.environ[self.env + "_REFUSED"] = wrong
        return parse_config(self.raw_config(data_dir, access_token=f"env:{self.env}_REFUSED")), wrong

    def raw_config(self, data_dir: Path, **account: Any) -> dict[str, Any]:
        """The config as a dict; ``account`` overrides the Matrix account's settings."""
        return {
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: {
                "homeserver": self.proxy.url, "user_id": self.bot.user_id, "access_token": f"env:{self.env}",
                "device_id": self.bot.device_id, "sync_timeout_s": 1,
                "access": {"dm": "open", "group": "mention"}, **account,
            }}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        }

    async def attach(self, gateway: Any) -> None:
        pass

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        if chat is None:
            learner = self.new_user("learner")
            if group:
                classmate = self.new_user("classmate")
                chat = await learner.create_room(invite=[self.bot.user_id, classmate.user_id], name="Study group")
                await classmate.join(chat)
            else:
                chat = await learner.create_room(invite=[self.bot.user_id], direct=True)
            self.owner[chat] = learner
        learner = self.owner[chat]
        if mention:
            event_id = await learner.say(chat, f"Tutor: {text}", mentions=[self.bot.user_id],
                                         html=f'<a href="https://matrix.to/#/{self.bot.user_id}">Tutor</a>: {text}')
        else:
            event_id = await learner.say(chat, text)
        return Said(chat=chat, user=learner.user_id, text=text, ref=event_id)

    async def say_again(self, said: Said) -> None:
        self.proxy.redeliver(said.ref)

    async def say_as_bot(self, text: str, *, chat: str) -> Said:
        # The bot's own account, by hand: its access token outside the gateway (another client of the same user).
        by_hand = MatrixUser(self.peer.url, self.bot)
        try:
            event_id = await by_hand.say(chat, text)
        finally:
            await by_hand.aclose()
        self.by_hand.add(event_id)
        return Said(chat=chat, user=self.bot.user_id, text=text, ref=event_id)

    async def seen(self, chat: str) -> list[Seen]:
        events = await self.owner[chat].events(chat)
        seen = []
        for message in shown_messages(events, self.bot.user_id):
            if message["event_id"] in self.by_hand:
                continue
            content = message["content"]
            relates = content.get("m.relates_to") or {}
            reply = (relates.get("m.in_reply_to") or {}).get("event_id")
            media = (content["url"],) if content.get("msgtype") in ("m.image", "m.audio", "m.video", "m.file") else ()
            seen.append(Seen(id=message["event_id"], text=content.get("formatted_body") or content.get("body", ""),
                             reply_to=reply, attachments=media))
        return seen

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self.proxy.fail_next_send(status, retry_after)

    async def rate_limited_sends(self) -> int:
        return self.proxy.outcomes["rate_limited"]

    async def send_requests(self) -> int:
        refused = sum(n for outcome, n in self.proxy.outcomes.items() if outcome.startswith("failed_"))
        return self.proxy.outcomes["rate_limited"] + refused + self.proxy.outcomes["posted"]

    async def outage(self, down: bool) -> None:
        self.proxy.down = down

    async def slow_sends(self, seconds: float) -> None:
        self.proxy.send_latency = seconds

    async def stop(self) -> None:
        os.environ.pop(self.env, None)
        os.environ.pop(self.env + "_REFUSED", None)
        for user in self.users:
            await user.aclose()
        await self.proxy.stop()
