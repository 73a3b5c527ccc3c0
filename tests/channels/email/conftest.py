"""A gateway with one email account on the session's Dovecot + SMTP peer, and the learners who write to it.

Each rig has its own bot address (through the contract harness, which also
brings ``seen`` and the fault injection), so tests share nothing but the
servers.  The gateway is the real one on the durable SQLite path, answering
with the contract suite's :class:`ContractResponder`; tests stop and start it
on the same data dir to check what survives a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.email_harness import EmailHarness, account_settings
from tests.contract.harness import ContractResponder, Seen, counter, eventually, settled
from tests.peers.email_peer import EmailPeer
from tests.waits import HANG_S

REFUSAL_RULES = ("automatic mail", "sender not allowed", "loop protection", "too large")
"""The drop-metric labels of mail the email channel read but will not answer."""


@dataclass
class EmailRig:
    harness: EmailHarness
    data_dir: Path
    responder: ContractResponder = field(default_factory=ContractResponder)
    gateway: Gateway | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def peer(self) -> EmailPeer:
        return self.harness.peer

    @property
    def bot(self) -> str:
        return self.harness.bot

    @property
    def channel(self) -> Any:
        assert self.gateway is not None
        return self.gateway.channel("email", "inbox")

    def config(self) -> Any:
        return parse_config({
            "data_dir": str(self.data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": "email", "account": "inbox"}],
            "channels": {"email": {"inbox": account_settings(self.peer, self.bot, f"env:{self.harness.env}", **self.settings)}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    async def start(self, **settings: Any) -> Gateway:
        self.settings.update(settings)
        self.gateway = Gateway(self.config(), responder=self.responder)
        await self.gateway.start()
        assert self.channel is not None, self.gateway.unavailable
        return self.gateway

    async def stop(self) -> None:
        if self.gateway is not None:
            gateway, self.gateway = self.gateway, None
            await gateway.stop()

    def learner(self) -> str:
        return self.peer.new_address("learner")

    def mail(self, sender: str, text: str = "", *, subject: str = "Homework", **headers: str) -> EmailMessage:
        mail = EmailMessage()
        mail["From"] = sender
        mail["To"] = self.bot
        mail["Subject"] = subject
        mail["Message-ID"] = make_msgid(domain=self.peer.domain)
        mail["Date"] = formatdate(localtime=True)
        for name, value in headers.items():
            mail[name.replace("_", "-")] = value
        mail.set_content(text or "a question")
        return mail

    async def send(self, mail: EmailMessage, *, login: str | None = None) -> EmailMessage:
        await asyncio.to_thread(self.peer.send, mail, login=login or str(mail["From"]))
        return mail

    async def replies(self, learner: str, count: int, *, timeout: float = HANG_S) -> list[Seen]:
        async def enough():
            seen = await self.harness.seen(learner)
            return seen if len(seen) >= count else None

        return await eventually(enough, timeout=timeout, what=f"{count} replies to {learner}")

    def received(self, learner: str) -> list[EmailMessage]:
        """The bot's mail in the learner's mailbox, as parsed messages."""
        return [m for m in self.peer.received(learner) if self.bot in str(m["From"])]

    def refused(self, rule: str | None = None) -> float:
        """Mail dropped by ``rule`` (a metric label: "automatic mail", "loop protection", ...), or by any
        screening rule or as unreadable when None."""
        assert self.gateway is not None
        rules = [rule] if rule else [*REFUSAL_RULES, "invalid event"]
        return sum(counter(self.gateway, "partners_dropped_total", channel="email", reason=r) for r in rules)

    async def quiet(self) -> None:
        assert self.gateway is not None
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")


@pytest.fixture
async def email_rig(email_peer, tmp_path) -> AsyncIterator[EmailRig]:
    harness = EmailHarness(email_peer)
    await harness.start(tmp_path)
    rig = EmailRig(harness, tmp_path / "data")
    try:
        yield rig
    finally:
        await rig.stop()
        await harness.stop()
