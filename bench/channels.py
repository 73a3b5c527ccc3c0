"""End-to-end latency of the real channels against their loopback peers: telegram, matrix, email, discord, slack
the WeChat family (weixin_oa, weixin_ilink, wecom, wecom_app), napcat, dingtalk, qq, mochat, feishu, whatsapp, mattermost,
msteams and zulip.

Each channel runs through its real SDK (python-telegram-bot, matrix-nio,
aioimaplib + aiosmtplib, discord.py, slack-bolt + slack_sdk in Socket Mode, wecom-aibot-sdk; the Official
Account, personal WeChat and WeCom app channels are the project's own httpx code) in an in-process Gateway on the
durable SQLite path, answered by the contract suite's echo responder (no model, no wait).  The
peers are the tests' own (tests/peers): the Bot API emulator process, a real
Synapse, a real Dovecot with the aiosmtpd server in front of it, the Discord
Gateway + REST emulator (in this process), the Slack emulator process, and the
WeChat Official Account, iLink, WeCom AI-bot and WeCom app emulators, each started
as its contract harness (tests/contract) starts it, in this process.  Users speak
through the peer at a fixed rate below the platform's declared send rates
(channels/platforms.toml), spread over many chats, after one warm-up turn.

Latency runs from just before the user's post call (so the post itself counts
against us) to the moment the peer itself recorded the bot's reply: the
emulator's send attempt time (telegram), the reply event's
``origin_server_ts`` (matrix, ms resolution), the emulator's timestamp of
the posted reply (discord), the reply's ``ts`` (slack: the emulator's clock at posting), the reply's delivery time in the
learner's Maildir, from Dovecot's file name (email); the emulator's clock when
it took the reply (the WeChat family: weixin_oa a passive reply read from the
callback's response or a customer-service message, how many of each is
printed; weixin_ilink a ``sendmessage``; wecom the stream's finishing frame;
wecom_app a ``message/send``; dingtalk the session webhook's answer).  Every reply is matched
to its message (the message's token in the echoed text; ``In-Reply-To`` for
email), so a missing or doubled answer is named, not averaged away.

CPU is ``time.process_time()`` of this process from the first message to the
moment the gateway has sent the last reply, per message.  Besides the gateway
it holds the users' side: their calls to the peer and, for email, the
aiosmtpd server and its LMTP relay (threads of this process), and the Discord
and WeChat-family emulators.  The Telegram and Slack emulators, Synapse and
Dovecot are processes of their own and are not counted.

Every selected channel's peer is checked before any runs: matrix needs the
Synapse venv (``bash deploy/peers/synapse.sh``, or ``SYNAPSE_VENV``), email
needs Dovecot and root (``bash deploy/peers/dovecot.sh``).

Usage: python bench/channels.py
       [--channels telegram,matrix,email,discord,slack,weixin_oa,weixin_ilink,wecom,wecom_app,napcat,dingtalk,qq,mochat,
                   feishu,whatsapp,mattermost,msteams,zulip]
       [--telegram-rate 20] [--telegram-chats 40] [--telegram-seconds 10]
       [--matrix-rate 10] [--matrix-rooms 20] [--matrix-seconds 10]
       [--email-rate 0.5] [--email-learners 10] [--email-seconds 20]
       [--discord-rate 20] [--discord-chats 40] [--discord-seconds 10]
       [--slack-rate 20] [--slack-chats 40] [--slack-seconds 10]
       [--weixin-oa-rate 20] [--weixin-oa-learners 40] [--weixin-oa-seconds 10]
       [--weixin-ilink-rate 10] [--weixin-ilink-learners 40] [--weixin-ilink-seconds 10]
       [--wecom-rate 10] [--wecom-chats 60] [--wecom-seconds 10]
       [--wecom-app-rate 20] [--wecom-app-members 40] [--wecom-app-seconds 10]
       [--napcat-rate 20] [--napcat-chats 60] [--napcat-seconds 10]
       [--dingtalk-rate 20] [--dingtalk-chats 120] [--dingtalk-seconds 10]
       [--qq-rate 20] [--qq-learners 40] [--qq-seconds 10]
       [--mochat-rate 20] [--mochat-sessions 40] [--mochat-seconds 10]
       [--feishu-rate 20] [--feishu-chats 40] [--feishu-seconds 10]
       [--whatsapp-rate 20] [--whatsapp-learners 200] [--whatsapp-seconds 10]
       [--mattermost-rate 20] [--mattermost-chats 40] [--mattermost-seconds 10]
       [--msteams-rate 20] [--msteams-chats 40] [--msteams-seconds 10]
       [--zulip-rate 20] [--zulip-learners 40] [--zulip-seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import make_msgid, parseaddr
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import ContractResponder, counter

TOKEN = re.compile(r"\bbench\d+\b")
PIPELINE = {"coalesce_window_s": 0, "shutdown_drain_s": 2}


def gateway_config(data_dir: Path, channel: str, account: str, settings: dict[str, Any]):
    return parse_config({
        "data_dir": str(data_dir),
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": channel, "account": account}],
        "channels": {channel: {account: {**settings, "access": {"dm": "open"}}}},
        "pipeline": PIPELINE,
    })


# --------------------------------------------------------------------------- one rig per channel


class Rig:
    """What every rig declares besides its hooks: its ``name`` in the table, the ``channel`` and ``account`` it
    configures (a platform's second kind of account is benched under a name of its own), its p99 target
    in seconds; and a ``note`` its replies may leave for the verdicts."""

    name: ClassVar[str]
    channel: ClassVar[str]
    account: ClassVar[str]
    target: ClassVar[float]
    note = ""


class TelegramRig(Rig):
    """The Bot API emulator process; private chats, one user each."""

    name, channel, account, target = "telegram", "telegram", "main", 1.5

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.token = f"{os.getpid()}:{uuid.uuid4().hex}"
        self.env = f"BENCH_TELEGRAM_TOKEN_{uuid.uuid4().hex[:8].upper()}"

    async def start(self, chats: int) -> None:
        from tests.peers.telegram_peer import TelegramPeer, TelegramUsers

        self.peer = TelegramPeer.start(self.workdir / "telegram-api.log")
        self.users = TelegramUsers(self.peer.url, self.token)
        await self.users.register()
        os.environ[self.env] = self.token
        self.chats = [str(7_000_000 + i) for i in range(chats)]
        self.warmup_chat = str(6_999_999)

    def settings(self) -> dict[str, Any]:
        return {"token": f"env:{self.env}", "api_url": self.peer.url}

    async def ready(self, gateway: Gateway) -> None:
        while not (await self.users.info())["polling"]:
            await asyncio.sleep(0.05)

    async def post(self, chat: str, text: str) -> None:
        await self.users.say(int(chat), text)

    async def replies(self) -> dict[str, list[float]]:
        attempts = (await self.users.attempts())["attempts"]
        posted_at = {(str(a["chat_id"]), a["message_id"]): a["at"] for a in attempts if "message_id" in a}  # ids are per chat
        found: dict[str, list[float]] = {}
        for chat, messages in (await self.users.seen()).items():
            for message in messages:
                for token in TOKEN.findall(message["text"]):
                    found.setdefault(token, []).append(posted_at[(chat, message["message_id"])])
        return found

    async def stop(self) -> None:
        os.environ.pop(self.env, None)
        if hasattr(self, "users"):
            await self.users.aclose()
        if hasattr(self, "peer"):
            self.peer.stop()


class MatrixRig(Rig):
    """A real Synapse; one learner per direct room, the bot joins on invite."""

    name, channel, account, target = "matrix", "matrix", "main", 1.5

    def __init__(self, workdir: Path) -> None:
        from tests.peers.synapse import synapse_python

        synapse_python()  # fails with the script that makes the venv
        self.workdir = workdir
        self.env = f"BENCH_MATRIX_TOKEN_{uuid.uuid4().hex[:8].upper()}"
        self.owner: dict[str, Any] = {}

    async def start(self, chats: int) -> None:
        from tests.peers.synapse import SynapsePeer

        self.peer = await asyncio.to_thread(SynapsePeer.start, self.workdir / "synapse")
        self.bot = self.peer.register("tutor")
        os.environ[self.env] = self.bot.access_token
        self.rooms = chats

    def settings(self) -> dict[str, Any]:
        return {"homeserver": self.peer.url, "user_id": self.bot.user_id, "access_token": f"env:{self.env}",
                "device_id": self.bot.device_id}

    async def ready(self, gateway: Gateway) -> None:
        from tests.peers.matrix_client import MatrixUser

        async def room(i: int) -> str:
            learner = MatrixUser(self.peer.url, await asyncio.to_thread(self.peer.register, f"learner{i}"))
            room_id = await learner.create_room(invite=[self.bot.user_id], direct=True)
            self.owner[room_id] = learner
            while self.bot.user_id not in await learner.joined(room_id):
                await asyncio.sleep(0.1)
            return room_id

        rooms = [await room(i) for i in range(self.rooms + 1)]
        self.warmup_chat, self.chats = rooms[0], rooms[1:]

    async def post(self, chat: str, text: str) -> None:
        await self.owner[chat].say(chat, text)

    async def replies(self) -> dict[str, list[float]]:
        from tests.peers.matrix_client import shown_messages

        found: dict[str, list[float]] = {}
        for room_id, learner in self.owner.items():
            for message in shown_messages(await learner.events(room_id), self.bot.user_id):
                for token in TOKEN.findall(message["content"].get("body", "")):
                    found.setdefault(token, []).append(message["origin_server_ts"] / 1000)
        return found

    async def stop(self) -> None:
        os.environ.pop(self.env, None)
        for learner in self.owner.values():
            await learner.aclose()
        if hasattr(self, "peer"):
            self.peer.stop()


class EmailRig(Rig):
    """Dovecot (IMAP IDLE, LMTP) and the aiosmtpd server; one learner address per chat.

    The account runs with the product's defaults (IDLE renewed every 60 s, a 30 s poll only
    where IDLE is missing, no copy to itself), so only IDLE push can meet the target."""

    name, channel, account, target = "email", "email", "inbox", 5.0

    def __init__(self, workdir: Path) -> None:
        from tests.peers.email_peer import EmailPeer

        # The peer's root is the workdir itself: Dovecot opens it to its `vmail` user (0755), not what is above it.
        self.peer = EmailPeer(workdir)  # fails with the script that installs Dovecot
        logging.getLogger("mail.log").setLevel(logging.ERROR)  # aiosmtpd's per-session notes about AUTH without TLS
        self.env = f"BENCH_EMAIL_PASSWORD_{uuid.uuid4().hex[:8].upper()}"
        self.asked: dict[str, str] = {}
        """Message-ID -> token."""
        self.started = False

    async def start(self, chats: int) -> None:
        await asyncio.to_thread(self.peer.start)
        self.started = True
        os.environ[self.env] = self.peer.password
        self.bot = self.peer.new_address("bot")
        self.chats = [self.peer.new_address("learner") for _ in range(chats)]
        self.warmup_chat = self.peer.new_address("learner")

    def settings(self) -> dict[str, Any]:
        from tests.contract.email_harness import account_settings

        return account_settings(self.peer, self.bot, f"env:{self.env}", copy_to_self=False, idle_renew_s=60,
                                poll_interval_s=30, timeout_s=30)

    async def ready(self, gateway: Gateway) -> None:
        pass  # the warm-up mail shows IDLE is up

    async def post(self, chat: str, text: str) -> None:
        mail = EmailMessage()
        mail["From"], mail["To"], mail["Subject"] = chat, self.bot, f"Question {text.split()[0]}"
        mail["Message-ID"] = make_msgid(domain=self.peer.domain)
        mail.set_content(text)
        self.asked[str(mail["Message-ID"])] = text.split()[0]
        await asyncio.to_thread(self.peer.send, mail, login=chat)

    async def replies(self) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        for learner in [self.warmup_chat, *self.chats]:
            for delivered, mail in await asyncio.to_thread(self.peer.dovecot.deliveries, learner):
                if parseaddr(str(mail["From"]))[1].lower() != self.bot.lower():
                    continue
                token = self.asked.get(str(mail["In-Reply-To"] or ""))
                if token:
                    found.setdefault(token, []).append(delivered)
        return found

    async def stop(self) -> None:
        os.environ.pop(self.env, None)
        if self.started:
            await asyncio.to_thread(self.peer.stop)


class SlackRig(Rig):
    """The Slack emulator process in Socket Mode; one learner per DM."""

    name, channel, account, target = "slack", "slack", "school", 1.5

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.env = {"bot": f"BENCH_SLACK_BOT_{uuid.uuid4().hex[:8].upper()}", "app": f"BENCH_SLACK_APP_{uuid.uuid4().hex[:8].upper()}"}

    async def start(self, chats: int) -> None:
        from tests.peers.slack_peer import SlackPeer, SlackUsers

        self.peer = SlackPeer.start(self.workdir / "slack-api.log")
        self.users = SlackUsers(self.peer.url)
        await self.users.register()
        os.environ[self.env["bot"]], os.environ[self.env["app"]] = self.users.token, self.users.app_token
        self.chats = [f"D{7_000_000 + i}" for i in range(chats)]
        self.warmup_chat = "D6999999"

    def settings(self) -> dict[str, Any]:
        return {"bot_token": f"env:{self.env['bot']}", "app_token": f"env:{self.env['app']}", "api_base": self.peer.api_base}

    async def ready(self, gateway: Gateway) -> None:
        while not (await self.users.app())["sockets"]:
            await asyncio.sleep(0.05)

    async def post(self, chat: str, text: str) -> None:
        await self.users.say(chat, text, user=f"U{chat[1:]}")

    async def replies(self) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        for messages in (await self.users.seen()).values():
            for message in messages:  # a message's ts is the emulator's clock when it posted it
                for token in TOKEN.findall(message["text"]):
                    found.setdefault(token, []).append(float(message["ts"]))
        return found

    async def stop(self) -> None:
        for name in self.env.values():
            os.environ.pop(name, None)
        if hasattr(self, "users"):
            await self.users.aclose()
        if hasattr(self, "peer"):
            self.peer.stop()


class DiscordRig(Rig):
    """The Gateway + REST emulator in this process (its CPU counts against us); one learner per DM."""

    name, channel, account, target = "discord", "discord", "main", 1.5

    def __init__(self, workdir: Path) -> None:
        from tests.contract.discord_harness import new_token

        self.workdir = workdir
        self.token = new_token()
        self.env = f"BENCH_DISCORD_TOKEN_{uuid.uuid4().hex[:8].upper()}"

    async def start(self, chats: int) -> None:
        from tests.peers.discord_server import DiscordPeer

        self.peer = await DiscordPeer(token=self.token).start()
        os.environ[self.env] = self.token
        self.users = {self.peer.dm_channel(str(10**17 + i)): str(10**17 + i) for i in range(chats + 1)}
        self.chats = list(self.users)[1:]
        self.warmup_chat = next(iter(self.users))

    def settings(self) -> dict[str, Any]:
        return {"token": f"env:{self.env}", "api_base": self.peer.api_base, "gateway_url": self.peer.gateway_url,
                "slash_commands": False}

    async def ready(self, gateway: Gateway) -> None:
        while not self.peer.connected():
            await asyncio.sleep(0.05)

    async def post(self, chat: str, text: str) -> None:
        await self.peer.say(text, user=self.users[chat])

    async def replies(self) -> dict[str, list[float]]:
        from datetime import datetime

        found: dict[str, list[float]] = {}
        for chat in self.users:
            for message in self.peer.seen(chat):
                for token in TOKEN.findall(message["content"]):
                    found.setdefault(token, []).append(datetime.fromisoformat(message["timestamp"]).timestamp())
        return found

    async def stop(self) -> None:
        os.environ.pop(self.env, None)
        if hasattr(self, "peer"):
            await self.peer.stop()


class HarnessRig(Rig):
    """A WeChat-family emulator as its contract harness (tests/contract) starts it, in this process (its CPU
    counts against us): the harness's users post, the emulator's own clock says when it took each reply."""

    chat_name: ClassVar[str]
    """One user per chat: ``chat_name.format(i)``."""
    account, target = "school", 1.5

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.harness: Any = None

    async def start(self, chats: int) -> None:
        self.harness = self.make_harness()
        await self.harness.start(self.workdir)  # the gateway's data dir is workdir/data, as the harness's
        self.warmup_chat, *self.chats = [self.chat_name.format(i) for i in range(chats + 1)]

    def make_harness(self) -> Any:
        raise NotImplementedError

    def settings(self) -> dict[str, Any]:
        return self.harness.settings()

    async def ready(self, gateway: Gateway) -> None:
        await self.harness.attach(gateway)  # serves the webhook (Tencent callbacks) or waits for the socket

    async def post(self, chat: str, text: str) -> None:
        await self.harness.say(text, chat=chat)

    def shown(self) -> list[tuple[str, float]]:
        """Every reply the emulator took: its text, and when."""
        raise NotImplementedError

    async def replies(self) -> dict[str, list[float]]:
        found: dict[str, list[float]] = {}
        for text, at in self.shown():
            for token in TOKEN.findall(text):
                found.setdefault(token, []).append(at)
        return found

    async def stop(self) -> None:
        if self.harness is not None:
            await self.harness.stop()


class WeixinOaRig(HarnessRig):
    """A WeChat Official Account in safe mode with passive replies on (the product's default): latency runs to
    the passive reply WeChat read from the callback's response, or to the customer-service message it took."""

    name, channel = "weixin_oa", "weixin"
    chat_name = "o-learner-{}"

    def make_harness(self) -> Any:
        from tests.contract.weixin_harness import WeixinHarness

        return WeixinHarness()

    def settings(self) -> dict[str, Any]:
        return {**self.harness.settings(), "passive_reply": True}  # the contract suite turns it off

    def shown(self) -> list[tuple[str, float]]:
        peer = self.harness.peer
        ours = [m for m in peer.sent if TOKEN.search(m["text"]["content"])]
        passive = sum(m.get("via") == "passive" for m in ours)
        self.note = (f"{passive} of {len(ours)} replies went passive (in the callback's response), "
                     f"{len(ours) - passive} as customer-service messages")
        return [(m["text"]["content"], at) for m, at in zip(peer.sent, peer.sent_at, strict=True)]


class WeixinIlinkRig(HarnessRig):
    """Personal WeChat (iLink), logged in by QR code before the gateway starts, with the product's 35 s
    long poll (the emulator holds one 30 s): latency runs from the learner's message enqueued to
    ``sendmessage`` taken."""

    name, channel = "weixin_ilink", "weixin"
    chat_name = "learner-{}@im.wechat"

    def make_harness(self) -> Any:
        from tests.contract.weixin_ilink_harness import IlinkHarness

        return IlinkHarness()

    async def start(self, chats: int) -> None:
        await super().start(chats)
        self.harness.peer.hold_s = 30.0  # the harness's short hold is for tests that stop the poll

    def settings(self) -> dict[str, Any]:
        return {"base_url": self.harness.base, "cdn_base_url": self.harness.base + "c2c/"}

    def shown(self) -> list[tuple[str, float]]:
        return [(s.text, s.at) for s in self.harness.peer.sent]

    async def stop(self) -> None:
        if self.harness is not None:
            await self.harness.peer.expire_session()  # answers the poll still held, so the emulator stops at once
        await super().stop()


class WecomRig(HarnessRig):
    """A WeCom AI bot through wecom-aibot-sdk on the emulator's websocket: latency runs from the callback
    frame pushed to its stream shown finished (a pushed message counts too, finished as it lands)."""

    name, channel = "wecom", "wecom"
    chat_name = "learner{}"

    def make_harness(self) -> Any:
        from tests.contract.wecom_harness import WecomHarness

        return WecomHarness()

    def settings(self) -> dict[str, Any]:
        server = self.harness.server
        return {"mode": {"kind": "ai_bot", "bot_id": server.bot_id, "secret": f"env:{self.harness.env}",
                         "ws_url": server.url}}

    def shown(self) -> list[tuple[str, float]]:
        return [(s.content, s.finished_at) for s in self.harness.server.timeline if s.finished]


class WecomAppRig(HarnessRig):
    """A WeCom self-built app: latency runs from the member's callback POST to ``message/send`` taken."""

    name, channel = "wecom_app", "wecom"
    chat_name = "member{}"

    def make_harness(self) -> Any:
        from tests.contract.wecom_app_harness import WecomAppHarness

        return WecomAppHarness()

    def shown(self) -> list[tuple[str, float]]:
        peer = self.harness.peer
        return [(m["text"]["content"], at) for m, at in zip(peer.sent, peer.sent_at, strict=True) if m["msgtype"] == "text"]


class NapcatRig(HarnessRig):
    """QQ through NapCat: the OneBot emulator's forward websocket, in this process; latency runs from the
    message event pushed to ``send_private_msg`` taken (QQ's self-throttle, 1 a second per chat, applies)."""

    name, channel, account = "napcat", "napcat", "qq"
    chat_name = "7{:05d}"

    def make_harness(self) -> Any:
        from tests.contract.napcat_harness import NapcatHarness

        return NapcatHarness()

    def settings(self) -> dict[str, Any]:
        server = self.harness.server
        return {"i_understand_the_ban_risk": True, "ws_url": server.url, "access_token": f"env:{self.harness.env}",
                "self_id": str(server.self_id)}

    def shown(self) -> list[tuple[str, float]]:
        return [(s.text, s.at) for s in self.harness.server.timeline]
class DingtalkRig(HarnessRig):
    """A DingTalk robot in Stream mode (the ticket through dingtalk-stream, the socket on the kit's session) with
    Markdown answers (no card template, the product's default): latency runs from the callback frame pushed to
    the answer taken by the learner's session webhook."""

    name, channel = "dingtalk", "dingtalk"
    chat_name = "learner{}"

    def make_harness(self) -> Any:
        from tests.contract.dingtalk_harness import DingtalkHarness

        return DingtalkHarness()

    def settings(self) -> dict[str, Any]:
        server = self.harness.server
        return {"client_id": server.client_id, "client_secret": f"env:{self.harness.env}", "api_base": server.url}

    def shown(self) -> list[tuple[str, float]]:
        return [(s.text, s.finished_at) for s in self.harness.server.shown if s.finished]
class QQRig(HarnessRig):
    """A QQ bot on its signed webhook: latency runs from the learner's event POST to the reply QQ's OpenAPI took."""

    name, channel = "qq", "qq"
    chat_name = "LEARNER{:04d}"

    def make_harness(self) -> Any:
        from tests.contract.qq_harness import QQHarness

        return QQHarness()

    def shown(self) -> list[tuple[str, float]]:
        peer = self.harness.peer
        return [(m["content"], at) for m, at in zip(peer.sent, peer.sent_at, strict=True)]


class MochatRig(HarnessRig):
    """A Mochat claw agent: python-socketio (msgpack) pushes from the emulator, in this process, answered over
    its REST ``sessions/send``; latency runs from the session event pushed to the send the emulator took."""

    name, channel = "mochat", "mochat"
    chat_name = "s-bench{}"

    def make_harness(self) -> Any:
        from tests.contract.mochat_harness import MochatHarness

        return MochatHarness()

    def settings(self) -> dict[str, Any]:
        server = self.harness.server
        return {"base_url": server.url, "claw_token": f"env:{self.harness.env}", "agent_user_id": server.agent,
                "sessions": [self.warmup_chat, *self.chats]}

    def shown(self) -> list[tuple[str, float]]:
        return [(s.content, s.at) for s in self.harness.server.sent]


class FeishuRig(HarnessRig):
    """A Feishu bot on lark-oapi's long connection (the product's default) to the emulator, in this process,
    with the product's ``stream: true``: the echo answer comes whole, so it goes as one rich-text reply (a
    CardKit card opens only for a streamed answer).  Latency runs from the event frame pushed to the reply
    the emulator took (a card would count when its streaming mode closed).  One learner per direct chat."""

    name, channel = "feishu", "feishu"
    chat_name = "oc_bench{}"

    def make_harness(self) -> Any:
        from tests.contract.feishu_harness import FeishuHarness

        return FeishuHarness()

    def settings(self) -> dict[str, Any]:
        server = self.harness.server
        return {"app_id": server.app_id, "app_secret": f"env:{self.harness.env}", "domain": server.url}

    async def post(self, chat: str, text: str) -> None:
        await self.harness.server.say(text, user=chat.replace("oc_", "ou_", 1), chat=chat)  # one learner per chat

    def shown(self) -> list[tuple[str, float]]:
        server = self.harness.server
        ours = [m for m in server.messages if TOKEN.search(server.text_of(m))]
        cards = sum(m.card is not None for m in ours)
        self.note = f"{len(ours) - cards} of {len(ours)} replies went as rich text, {cards} on streaming cards"
        return [(server.text_of(m), server.cards[m.card].closed_at if m.card else m.shown_at)
                for m in server.messages if server.finished(m)]


class WhatsappRig(HarnessRig):
    """A WhatsApp number on the Cloud API emulator: latency runs from the learner's signed webhook POST to the
    message the emulated Graph took.  WhatsApp's pair rate (one message to a user per 6 s, platforms.toml) paces
    each chat, so the default spreads 20 msg/s over 200 learners: each writes every 10 s, as people do."""

    name, channel = "whatsapp", "whatsapp"
    chat_name = "1555800{:04d}"

    def make_harness(self) -> Any:
        from tests.contract.whatsapp_harness import WhatsappHarness

        return WhatsappHarness()

    def shown(self) -> list[tuple[str, float]]:
        peer = self.harness.peer
        return [(s.text, at) for s, at in zip(peer.shown, peer.shown_at, strict=True)]
class MattermostRig(HarnessRig):
    """A Mattermost bot: ``posted`` events on the kit's websocket session from the emulator, in this process,
    answered over REST ``POST /posts``; latency runs from the post pushed to the answer the emulator took."""

    name, channel = "mattermost", "mattermost"
    chat_name = "dbench{:019d}"

    def make_harness(self) -> Any:
        from tests.contract.mattermost_harness import MattermostHarness

        return MattermostHarness()

    def settings(self) -> dict[str, Any]:
        return {"url": self.harness.server.url, "token": f"env:{self.harness.env}"}

    def shown(self) -> list[tuple[str, float]]:
        return [(p.message, p.at) for room in self.harness.server.rooms.values() for p in room.posts if p.via_api]


class MsteamsRig(HarnessRig):
    """A Teams bot on its Bot Framework webhook: the emulator, in this process, signs each activity with its own
    key and the gateway checks it; latency runs from the activity's POST to the message the emulated Bot
    Connector took (an answer that came as a 1:1 stream: when its final message ended it).  One learner per chat."""

    name, channel = "msteams", "msteams"
    chat_name = "a:1bench{}"

    def make_harness(self) -> Any:
        from tests.contract.msteams_harness import MsteamsHarness

        return MsteamsHarness()

    def shown(self) -> list[tuple[str, float]]:
        return [(s.text, s.at) for s in self.harness.peer.shown if s.text and (s.final or not s.stream)]
class ZulipRig(HarnessRig):
    """A Zulip bot on its event queue: the emulator, in this process, hands each DM out on the long poll and takes
    the answer's ``POST /messages``; latency runs from the learner's message to the send the emulator took.  Zulip's
    default of 200 requests a minute per user would hold 20 msg/s to 3.3, so the account names a self-hosted
    server's raised limit (``api_rate_per_minute``), as an operator who runs classes at this rate would."""

    name, channel = "zulip", "zulip"
    chat_name = "Bench learner {}"

    def make_harness(self) -> Any:
        from tests.contract.zulip_harness import ZulipHarness

        return ZulipHarness()

    async def start(self, chats: int) -> None:
        await super().start(chats)
        server = self.harness.server
        self.warmup_chat, *self.chats = [str(server.user(name)) for name in (self.warmup_chat, *self.chats)]

    def settings(self) -> dict[str, Any]:
        return {**self.harness.settings(self.harness.env), "api_rate_per_minute": 6000}

    def shown(self) -> list[tuple[str, float]]:
        return [(s.content, s.at) for s in self.harness.server.sent]


RIGS = {"telegram": TelegramRig, "matrix": MatrixRig, "email": EmailRig, "discord": DiscordRig, "slack": SlackRig,
        "weixin_oa": WeixinOaRig, "weixin_ilink": WeixinIlinkRig, "wecom": WecomRig, "wecom_app": WecomAppRig,
        "napcat": NapcatRig, "dingtalk": DingtalkRig,
        "qq": QQRig, "mochat": MochatRig, "feishu": FeishuRig,
        "whatsapp": WhatsappRig, "mattermost": MattermostRig, "msteams": MsteamsRig, "zulip": ZulipRig}


# --------------------------------------------------------------------------- the measurement


@dataclass
class Result:
    channel: str
    messages: int
    rate: float
    chats: int
    latencies: list[float] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)
    cpu: float = 0.0
    target: float = 0.0
    note: str = ""

    @property
    def exactly_once(self) -> bool:
        return not self.missing and not self.doubled and len(self.latencies) == self.messages


async def sent(gateway: Gateway, channel: str, count: float, timeout: float) -> bool:
    """Wait until the gateway has sent ``count`` reply parts on ``channel`` (an in-process check: no I/O)."""
    deadline = time.monotonic() + timeout
    while counter(gateway, "partners_messages_out_total", channel=channel) < count:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def measure(rig: Any, workdir: Path, *, rate: float, seconds: float, chats: int, grace: float) -> Result:
    await rig.start(chats)
    gateway = Gateway(gateway_config(workdir / "data", rig.channel, rig.account, rig.settings()),
                      responder=ContractResponder())
    await gateway.start()
    try:
        if gateway.channel(rig.channel, rig.account) is None:
            raise SystemExit(f"channels.py: the {rig.name} channel did not start: {gateway.unavailable}")
        try:
            await asyncio.wait_for(rig.ready(gateway), 120)
        except TimeoutError:
            raise SystemExit(f"channels.py: {rig.name}: the bot was not ready at the peer within 120 s") from None
        await rig.post(rig.warmup_chat, "warm-up")
        if not await sent(gateway, rig.channel, 1, 60):
            raise SystemExit(f"channels.py: {rig.name}: no answer to the warm-up message within 60 s")

        count = int(rate * seconds)
        result = Result(rig.name, count, rate, len(rig.chats), target=rig.target)
        posted: dict[str, float] = {}
        before = counter(gateway, "partners_messages_out_total", channel=rig.channel)

        async def post(token: str, chat: str, n: int) -> None:
            posted[token] = time.time()
            await rig.post(chat, f"{token} what is {n} + 1?")

        cpu0, t0 = time.process_time(), time.perf_counter()
        posts = []
        for n in range(count):
            if (delay := t0 + n / rate - time.perf_counter()) > 0:
                await asyncio.sleep(delay)
            posts.append(asyncio.create_task(post(f"bench{n}", rig.chats[n % len(rig.chats)], n)))
        await asyncio.gather(*posts)
        await sent(gateway, rig.channel, before + count, 30 + 10 * rig.target)
        result.cpu = time.process_time() - cpu0
        await asyncio.sleep(grace)  # a doubled reply would land now
        seen = await rig.replies()
        result.note = rig.note
    finally:
        await gateway.stop()
    for token, at in posted.items():
        visible = sorted(seen.get(token, []))
        if not visible:
            result.missing.append(token)
            continue
        if len(visible) > 1:
            result.doubled.append(token)
        result.latencies.append(visible[0] - at)
    result.latencies.sort()
    return result


# --------------------------------------------------------------------------- the table


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def row(r: Result) -> str:
    lat = r.latencies
    return (f"{r.channel:<12} {r.messages:>5} {r.rate:>6g} {r.chats:>6} {len(lat):>8} "
            f"{1000 * pct(lat, 0.5):>8.0f} {1000 * pct(lat, 0.99):>8.0f} {1000 * (lat[-1] if lat else float('nan')):>8.0f} "
            f"{1000 * r.cpu / max(r.messages, 1):>10.2f} {'yes' if r.exactly_once else 'NO':>12}")


def verdicts(r: Result) -> list[str]:
    lines = []
    if r.missing:
        lines.append(f"FAILED {r.channel}: {len(r.missing)} of {r.messages} messages got no reply: {', '.join(r.missing[:10])}")
    if r.doubled:
        lines.append(f"FAILED {r.channel}: {len(r.doubled)} messages were answered more than once: {', '.join(r.doubled[:10])}")
    if r.note:
        lines.append(f"{r.channel}: {r.note}")
    p99 = pct(r.latencies, 0.99)
    lines.append(f"{r.channel}: every message answered exactly once: {'ok' if r.exactly_once else 'MISSED'}; "
                 f"p99 < {r.target:g} s: {p99:.3f} s ({'ok' if p99 < r.target else 'MISSED'})")
    return lines


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--channels", default=",".join(RIGS), help="comma-separated subset of " + ",".join(RIGS))
    for name, rate, chats, seconds, unit in (("telegram", 20, 40, 10, "chats"), ("matrix", 10, 20, 10, "rooms"),
                                             ("email", 0.5, 10, 20, "learners"), ("discord", 20, 40, 10, "chats"),
                                             ("slack", 20, 40, 10, "chats"), ("weixin_oa", 20, 40, 10, "learners"),
                                             ("weixin_ilink", 10, 40, 10, "learners"), ("wecom", 10, 60, 10, "chats"),
                                             ("wecom_app", 20, 40, 10, "members"), ("napcat", 20, 60, 10, "chats"),
                                             ("dingtalk", 20, 120, 10, "chats"), ("qq", 20, 40, 10, "learners"),
                                             ("mochat", 20, 40, 10, "sessions"), ("feishu", 20, 40, 10, "chats"),
                                             ("whatsapp", 20, 200, 10, "learners"),
                                             ("mattermost", 20, 40, 10, "chats"),
                                             ("msteams", 20, 40, 10, "chats"),
                                             ("zulip", 20, 40, 10, "learners")):
        flag = name.replace("_", "-")
        parser.add_argument(f"--{flag}-rate", type=float, default=rate, dest=f"{name}_rate", metavar="N",
                            help=f"offered {name} messages per second (default {rate:g})")
        parser.add_argument(f"--{flag}-{unit}", type=int, default=chats, dest=f"{name}_chats", metavar="N",
                            help=f"{unit} they are spread over, one user each (default {chats})")
        parser.add_argument(f"--{flag}-seconds", type=float, default=seconds, dest=f"{name}_seconds", metavar="S",
                            help=f"(default {seconds:g})")
    parser.add_argument("--grace", type=float, default=2.0, help="seconds to wait after the last reply for doubles")
    args = parser.parse_args()

    names = [n.strip() for n in args.channels.split(",") if n.strip()]
    if unknown := [n for n in names if n not in RIGS]:
        parser.error(f"unknown channel(s) {', '.join(unknown)}; choose from {', '.join(RIGS)}")
    workdirs = {name: Path(tempfile.mkdtemp(prefix=f"partners-bench-{name}-")) for name in names}
    rigs = []
    try:
        try:  # every prerequisite first, so a missing Dovecot does not end the run halfway
            rigs = [RIGS[name](workdirs[name]) for name in names]
        except AssertionError as error:
            raise SystemExit(f"channels.py: a peer is missing: {error}") from None
        header = (f"{'channel':<12} {'msgs':>5} {'msg/s':>6} {'chats':>6} {'answered':>8} {'p50 ms':>8} {'p99 ms':>8} "
                  f"{'max ms':>8} {'cpu ms/msg':>10} {'exactly-once':>12}")
        print("real SDKs against loopback peers, in-process Gateway (durable SQLite path), echo responder")
        print(header)
        print("-" * len(header))
        results = []
        for rig in rigs:
            try:
                result = await measure(rig, workdirs[rig.name], rate=getattr(args, f"{rig.name}_rate"),
                                       seconds=getattr(args, f"{rig.name}_seconds"),
                                       chats=getattr(args, f"{rig.name}_chats"), grace=args.grace)
            except AssertionError as error:
                raise SystemExit(f"channels.py: the {rig.name} peer failed: {error}") from None
            finally:
                await rig.stop()
            results.append(result)
            print(row(result), flush=True)
    finally:
        for workdir in workdirs.values():
            shutil.rmtree(workdir, ignore_errors=True)
    print()
    for result in results:
        for line in verdicts(result):
            print(line)
    print("\ncpu ms/msg is this whole process: the gateway plus the users' calls to the peer"
          + (", and for email the aiosmtpd server and its LMTP relay (threads here)" if "email" in names else "")
          + "; the Telegram emulator, Synapse and Dovecot run as their own processes and are not counted"
          + (" (the Discord emulator runs in this process and is)" if "discord" in names else "")
          + ("; the WeChat and WeCom emulators run in this process and are counted (the Official Account's and the"
             " app's open a fresh connection for every callback they post)" if any(issubclass(RIGS[n], HarnessRig)
                                                                                  for n in names) else "")
          + ".")


if __name__ == "__main__":
    asyncio.run(main())
