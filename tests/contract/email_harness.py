"""Contract harness for the ``email`` channel against real Dovecot plus the aiosmtpd SMTP server.

Each harness gets a fresh bot address on the session's peer; each ``say``
comes from a fresh learner address (unless a chat is given), sent through
the SMTP server into the bot's inbox.  ``chat`` is the learner's address --
the conversation's chat -- and ``seen(chat)`` reads the mail the bot sent
that learner from the learner's own Dovecot mailbox.

What a learner "sees" of a reply is its text/html alternative, up to the
quoted message below it (the "On <date>, <name> wrote:" block is the
learner's own words, not the bot's); media are the reply's attachments, by
URL for ``message/external-body`` parts, by file name otherwise.

Faults are injected at the SMTP server, for the bot's mail only.  The suite
speaks in HTTP-like statuses; the server answers with the SMTP reply a real
provider gives for the same trouble, naming the status in its text so the
test can match it (SMTP has no 429 of its own)::

    429 -> 451 4.7.1 (rate limited, "try again in N seconds")
    401 -> 535 5.7.8 (authentication failed)
    503 -> 421 4.3.2 (service not available)
    400 -> 554 5.6.0 (message refused)

``lost_response`` is not declared: SMTP takes no idempotency key, so a
message posted before the answer was lost shows twice (ADR 0011).  The
outage is real: Dovecot is stopped and started again, while the SMTP server
queues learners' mail as an MTA would.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import uuid
from email.message import EmailMessage
from email.utils import make_msgid, parseaddr
from pathlib import Path
from typing import Any

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.peers.email_peer import EmailPeer
from tests.waits import HTTP_S

_ids = itertools.count(1)

SMTP_REPLIES = {
    429: "451 4.7.1 Too many messages (status 429): try again in {retry_after:g} seconds",
    401: "535 5.7.8 Authentication credentials invalid (status 401)",
    503: "421 4.3.2 Service not available, closing channel (status 503)",
    400: "554 5.6.0 Message refused (status 400)",
}


def reply_html(mail: EmailMessage) -> str:
    """The bot's own words in a reply: the HTML alternative's reply block, without the quote under it."""
    from channels.email.compose import QUOTE_MARK, REPLY_MARK

    body = mail.get_body(preferencelist=("html",))
    html = body.get_content() if body is not None else ""
    start = html.find(REPLY_MARK)
    if start < 0:
        return html
    inner = html[start + len(REPLY_MARK):]
    end = inner.find("</div>" + QUOTE_MARK)
    return inner[:end] if end >= 0 else inner[: inner.rfind("</div>")]


def shown_attachments(mail: EmailMessage) -> tuple[str, ...]:
    shown = []
    for part in mail.iter_attachments():
        if part.get_content_type() == "message/external-body":
            shown.append(part.get_param("URL") or "")
        else:
            shown.append(part.get_filename() or "")
    return tuple(shown)


class EmailHarness:
    channel = "email"
    account = "inbox"
    features = frozenset({"own_echo", "faults", "outage", "credentials"})

    @classmethod
    def create(cls, request: Any) -> EmailHarness:
        return cls(request.getfixturevalue("email_peer"))

    def __init__(self, peer: EmailPeer) -> None:
        self.peer = peer
        self.bot = peer.new_address("bot")
        self.env = f"EMAIL_PASSWORD_{uuid.uuid4().hex[:8].upper()}"
        self._sent: dict[str, list[EmailMessage]] = {}
        self._rate_limited_before = 0

    async def start(self, workdir: Path) -> None:
        os.environ[self.env] = self.peer.password
        self._rate_limited_before = self.peer.smtp.relay.answers_to[(self.bot.lower(), "451")]

    def gateway_config(self, data_dir: Path) -> Config:
        return parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: account_settings(self.peer, self.bot, f"env:{self.env}")}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        wrong = f"not-the-password-{uuid.uuid4().hex[:8]}"
        os.environ[self.env + "_REFUSED"] = wrong
        config = parse_config({
            "data_dir": str(data_dir),
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: account_settings(self.peer, self.bot, f"env:{self.env}_REFUSED")}},
        })
        return config, wrong

    async def attach(self, gateway: Any) -> None:
        pass

    async def _submit(self, mail: EmailMessage, login: str) -> None:
        await asyncio.to_thread(self.peer.send, mail, login=login)

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        assert not group, "email has no group chats"
        learner = chat or self.peer.new_address("learner")
        mail = EmailMessage()
        mail["From"] = learner
        mail["To"] = self.bot
        mail["Subject"] = f"Question {next(_ids)}"
        mail["Message-ID"] = make_msgid(domain=self.peer.domain)
        mail.set_content(text)
        await self._submit(mail, learner)
        return Said(chat=learner, user=learner, text=text, ref=mail)

    async def say_again(self, said: Said) -> None:
        await self._submit(said.ref, said.user)  # the same mail, Message-ID and all, delivered once more

    async def say_as_bot(self, text: str, *, chat: str) -> Said:
        mail = EmailMessage()
        mail["From"] = self.bot
        mail["To"] = self.bot
        mail["Subject"] = "A note to self"
        mail["Message-ID"] = make_msgid(domain=self.peer.domain)
        mail.set_content(text)
        await self._submit(mail, self.bot)
        return Said(chat=chat, user=self.bot, text=text, ref=mail)

    async def seen(self, chat: str) -> list[Seen]:
        mails = await asyncio.to_thread(self.peer.received, chat)
        return [
            Seen(id=str(m["Message-ID"]), text=reply_html(m), reply_to=str(m["In-Reply-To"] or "") or None,
                 attachments=shown_attachments(m))
            for m in mails if parseaddr(str(m["From"]))[1].lower() == self.bot.lower()
        ]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self.peer.smtp.fail_next(SMTP_REPLIES[status].format(retry_after=retry_after), sender=self.bot)

    async def rate_limited_sends(self) -> int:
        return self.peer.smtp.relay.answers_to[(self.bot.lower(), "451")] - self._rate_limited_before

    async def send_requests(self) -> int:
        return self.peer.smtp.relay.submissions[self.bot.lower()]

    async def outage(self, down: bool) -> None:
        await asyncio.to_thread(self.peer.dovecot.stop if down else self.peer.dovecot.start)

    async def slow_sends(self, seconds: float) -> None:
        raise AssertionError("the email peer does not delay sends")

    async def stop(self) -> None:
        os.environ.pop(self.env, None)
        os.environ.pop(self.env + "_REFUSED", None)
        if not self.peer.dovecot.running:
            await asyncio.to_thread(self.peer.dovecot.start)


def account_settings(peer: EmailPeer, bot: str, secret: str, **overrides: Any) -> dict[str, Any]:
    """One email account on the loopback peer: plain connections, IDLE, a copy of each reply to itself."""
    settings: dict[str, Any] = {
        "address": bot, "display_name": "Tutor", "password": secret,
        "imap_host": "127.0.0.1", "imap_port": peer.imap_port, "imap_security": "none",
        "smtp_host": "127.0.0.1", "smtp_port": peer.smtp_port, "smtp_security": "none",
        "copy_to_self": True, "idle_renew_s": 20, "poll_interval_s": 0.5, "timeout_s": HTTP_S,
        "access": {"dm": "open"},
    }
    settings.update(overrides)
    return settings
