"""The email probe against real Dovecot and the SMTP server: a read-only IMAP login and an SMTP AUTH."""

from __future__ import annotations

import socket

import pytest

from gateway.configfile import parse_config
from gateway.doctor import probe_account
from tests.contract.email_harness import account_settings
from tests.contract.harness import eventually

pytestmark = pytest.mark.timeout(120)


def probe_config(peer, bot: str, **overrides):
    return parse_config({"data_dir": "unused",
                         "channels": {"email": {"inbox": account_settings(peer, bot, "env:EMAIL_PROBE_PASSWORD", **overrides)}}})


async def test_a_working_mailbox_has_no_problem_and_its_mail_stays_unread(email_peer, monkeypatch):
    from email.message import EmailMessage

    monkeypatch.setenv("EMAIL_PROBE_PASSWORD", email_peer.password)
    bot, learner = email_peer.new_address("bot"), email_peer.new_address("learner")
    mail = EmailMessage()
    mail["From"], mail["To"], mail["Subject"] = learner, bot, "unread?"
    mail.set_content("still unread after the probe")
    email_peer.send(mail, login=learner)
    await eventually(lambda: email_peer.dovecot.doveadm("fetch", "-u", bot, "uid", "mailbox", "INBOX", "all").strip(),
                     timeout=60, what="the mail to be delivered")

    result = await probe_account(probe_config(email_peer, bot), "email", "inbox")

    assert result.problems == (), result
    assert result.checked == (f"IMAP 127.0.0.1:{email_peer.imap_port} and SMTP 127.0.0.1:{email_peer.smtp_port} as {bot}")
    flags = email_peer.dovecot.doveadm("fetch", "-u", bot, "flags", "mailbox", "INBOX", "all")
    assert "flags:" in flags and "\\Seen" not in flags


async def test_a_missing_mailbox_and_a_closed_smtp_port_are_each_named_with_the_fix(email_peer, monkeypatch):
    monkeypatch.setenv("EMAIL_PROBE_PASSWORD", email_peer.password)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]

    result = await probe_account(probe_config(email_peer, email_peer.new_address("bot"), mailbox="Homework",
                                              smtp_port=port), "email", "inbox")

    imap, smtp = result.problems
    assert imap.message == "IMAP mailbox 'Homework' cannot be opened on 127.0.0.1"
    assert imap.fix == "set mailbox: to a folder that exists (usually INBOX)"
    assert smtp.message == f"nothing answers for SMTP at 127.0.0.1:{port} (connection refused)"
    assert "smtp_port" in smtp.fix


async def test_a_wrong_password_is_refused_by_both_sides(email_peer, monkeypatch):
    monkeypatch.setenv("EMAIL_PROBE_PASSWORD", "not-the-password")
    bot = email_peer.new_address("bot")

    result = await probe_account(probe_config(email_peer, bot), "email", "inbox")

    assert [p.message for p in result.problems] == [
        f"the IMAP server 127.0.0.1 refused the login for {bot}",
        f"the SMTP server 127.0.0.1 refused the login for {bot}",
    ]
    assert all("app password" in p.fix for p in result.problems)
