"""The email channel against real Dovecot and the SMTP server: threading, screening, attachments, cursors.

Everything goes through the peer: learners' mail is submitted over SMTP and
delivered by Dovecot's LMTP; the bot reads it over IMAP; its replies are read
from the learners' own mailboxes.
"""

from __future__ import annotations

import asyncio
import logging
import re
from email.utils import make_msgid

import pytest

from gateway.core.errors import AuthFailed, BadRequest
from gateway.core.messages import (
    AccountId,
    Address,
    Attachment,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    Media,
    Referrer,
    RenderedPart,
)
from tests.contract.harness import counter, eventually
from tests.waits import HTTP_S

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + b"\x00" * 40
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


# --------------------------------------------------------------------------- threads, subjects, quoting


async def test_a_reply_in_the_thread_is_the_same_conversation_and_keeps_the_thread(email_rig):
    await email_rig.start()
    learner = email_rig.learner()
    first = await email_rig.send(email_rig.mail(learner, "What is 7 x 8?", subject="Re: RE: Times tables"))
    await email_rig.replies(learner, 1)
    [reply] = email_rig.received(learner)

    follow = email_rig.mail(learner, "And 7 x 9?\n\nOn Mon, the Tutor wrote:\n> echo: What is 7 x 8?",
                            subject=str(reply["Subject"]), In_Reply_To=str(reply["Message-ID"]),
                            References=f"{first['Message-ID']} {reply['Message-ID']}")
    await email_rig.send(follow)
    await email_rig.replies(learner, 2)
    await email_rig.quiet()

    one, two = email_rig.responder.turns
    assert one.messages[0].address.conversation.key == two.messages[0].address.conversation.key
    assert one.messages[0].address.conversation.chat == learner
    assert one.messages[0].address.conversation.thread == str(first["Message-ID"])
    assert two.messages[0].text == "And 7 x 9?"  # the quoted history is not said again

    second = email_rig.received(learner)[1]
    assert str(reply["Subject"]) == "Re: Times tables"  # one "Re:", however many the learner's had
    assert str(second["Subject"]) == "Re: Times tables"
    assert str(second["In-Reply-To"]) == str(follow["Message-ID"])
    assert str(second["References"]).split() == [str(first["Message-ID"]), str(reply["Message-ID"]), str(follow["Message-ID"])]
    assert str(second["Auto-Submitted"]) == "auto-replied"


async def test_a_new_thread_from_the_same_learner_is_a_new_conversation(email_rig):
    await email_rig.start()
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "fractions?", subject="Fractions"))
    await email_rig.replies(learner, 1)
    await email_rig.send(email_rig.mail(learner, "decimals?", subject="Decimals"))
    await email_rig.replies(learner, 2)
    one, two = email_rig.responder.turns
    assert one.messages[0].address.conversation.chat == two.messages[0].address.conversation.chat == learner
    assert one.messages[0].address.conversation.key != two.messages[0].address.conversation.key


async def test_the_reply_quotes_the_learner_in_both_alternatives(email_rig):
    email_rig.responder.answer = lambda turn: "Try **grouping** the terms: <b> is not a tag here."
    await email_rig.start()
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "How do I factor x^2 + 5x + 6?"))
    await email_rig.replies(learner, 1)
    [mail] = email_rig.received(learner)
    assert mail.get_content_type() == "multipart/alternative"
    plain = mail.get_body(preferencelist=("plain",)).get_content()
    html = mail.get_body(preferencelist=("html",)).get_content()
    assert "<strong>grouping</strong>" in html and "&lt;b&gt;" in html
    assert plain.startswith("Try grouping the terms: <b> is not a tag here.")
    assert "<" + "strong>" not in plain
    assert " wrote:\n> How do I factor x^2 + 5x + 6?" in plain
    assert plain.split(" wrote:")[0].rsplit("\n", 1)[-1].startswith("On ")
    assert '<blockquote type="cite">How do I factor x^2 + 5x + 6?</blockquote>' in html


# --------------------------------------------------------------------------- screening


AUTOMATIC = {
    "auto-submitted": {"Auto_Submitted": "auto-replied"},
    "precedence-bulk": {"Precedence": "bulk"},
    "precedence-list": {"Precedence": "list"},
    "precedence-junk": {"Precedence": "junk"},
    "list-id": {"List_Id": "<maths.school.test>"},
    "x-autoreply": {"X_Autoreply": "yes"},
    "x-auto-response-suppress": {"X_Auto_Response_Suppress": "OOF"},
}


async def test_automatic_mail_is_never_answered_but_recorded_and_passed_over(email_rig):
    """Every rule at once through the real server (each rule alone is parametrized in the unit tests)."""
    await email_rig.start()
    learner = email_rig.learner()
    for headers in AUTOMATIC.values():
        await email_rig.send(email_rig.mail(learner, "out of office", **headers))
    for robot in ("noreply", "no-reply", "MAILER-DAEMON"):
        domain = email_rig.peer.new_address("robots").replace("@", ".")
        await email_rig.send(email_rig.mail(f"{robot}@{domain}", "automatic notice"))
    report = email_rig.mail(learner, "")
    report.make_mixed()
    report.replace_header("Content-Type", 'multipart/report; report-type=delivery-status; boundary="b"')
    await email_rig.send(report)
    bounce = email_rig.mail(learner, "Undelivered Mail Returned to Sender")
    await asyncio.to_thread(_send_with_null_sender, email_rig, bounce)
    await email_rig.send(email_rig.mail(learner, "a real question"))

    await email_rig.replies(learner, 1)
    await email_rig.quiet()
    assert [t.messages[0].text for t in email_rig.responder.turns] == ["a real question"]
    assert email_rig.refused("automatic mail") == len(AUTOMATIC) + 3 + 2
    assert len(email_rig.received(learner)) == 1


def _send_with_null_sender(rig, mail) -> None:
    """A bounce: the envelope sender is empty, so Dovecot writes ``Return-Path: <>``."""
    import smtplib

    with smtplib.SMTP("127.0.0.1", rig.peer.smtp_port, timeout=HTTP_S) as client:
        client.login(rig.bot, rig.peer.password)
        client.sendmail("", [rig.bot], mail.as_bytes())


async def test_senders_outside_the_allowlist_are_refused_with_the_reason(email_rig, caplog):
    caplog.set_level(logging.INFO, logger="gateway.pipeline.ingest")  # refusals are routine: logged at info
    allowed, stranger = email_rig.learner(), email_rig.learner()
    await email_rig.start(allowed_senders=[allowed.upper()])
    await email_rig.send(email_rig.mail(stranger, "let me in"))
    await email_rig.send(email_rig.mail(allowed, "hello"))
    await email_rig.replies(allowed, 1)
    await email_rig.quiet()
    assert [t.messages[0].sender.user for t in email_rig.responder.turns] == [allowed]
    assert email_rig.refused("sender not allowed") == email_rig.refused() == 1
    assert f"sender {stranger} is not in allowed_senders" in caplog.text
    assert email_rig.received(stranger) == []



async def test_attachments_of_refused_mail_are_never_written_to_disk(email_rig):
    """Screening comes before saving: a stranger (or a robot) must not be able to fill the partner's
    disk with attachments of mail that is never answered."""
    allowed, stranger = email_rig.learner(), email_rig.learner()
    await email_rig.start(allowed_senders=[allowed])
    unwanted = email_rig.mail(stranger, "take my files")
    unwanted.add_attachment(PDF, maintype="application", subtype="pdf", filename="junk.pdf")
    await email_rig.send(unwanted)
    await email_rig.send(email_rig.mail(allowed, "hello"))
    await email_rig.replies(allowed, 1)
    await email_rig.quiet()
    assert email_rig.refused("sender not allowed") == 1
    assert [p.name for p in email_rig.data_dir.rglob("*") if p.is_file() and p.name.endswith(".pdf")] == []

async def test_a_sender_past_the_hourly_cap_is_not_answered(email_rig):
    await email_rig.start(max_mails_per_sender_hour=2)
    learner = email_rig.learner()
    for n in range(3):
        await email_rig.send(email_rig.mail(learner, f"question {n}", subject=f"Q{n}"))
    await email_rig.replies(learner, 2)
    await eventually(lambda: email_rig.refused("loop protection") == 1, what="the third mail to be refused")
    await email_rig.quiet()
    assert len(email_rig.received(learner)) == 2


async def test_long_message_ids_reach_the_learner_literally_so_clients_can_thread(email_rig):
    """Gmail's Message-IDs run past 78 characters; folded as RFC 2047 encoded words in In-Reply-To and
    References they are no longer ids, and the learner's client shows the reply outside the thread."""
    await email_rig.start()
    learner = email_rig.learner()
    long_id = "<CAKwvOdk" + "Kd8Hq0sZp7dEJ9Ex1r3z" * 4 + "=Xg@mail.gmail.com>"
    question = email_rig.mail(learner, "What is 7 x 8?")
    question.replace_header("Message-ID", long_id)
    await email_rig.send(question)
    await email_rig.replies(learner, 1)
    [raw] = [r for r in _raw_mails(email_rig, learner) if email_rig.bot.encode() in r.split(b"\r\n\r\n", 1)[0]]
    head = re.sub(rb"\r?\n[ \t]+", b" ", raw.split(b"\n\n" if b"\r\n" not in raw else b"\r\n\r\n", 1)[0])
    headers = dict(line.split(b": ", 1) for line in head.splitlines() if b": " in line)
    assert headers[b"In-Reply-To"].decode() == long_id
    assert headers[b"References"].decode().split() == [long_id]


def _raw_mails(rig, address: str) -> list[bytes]:
    """The bytes of every mail in the address's Maildir, as the learner's client would read them."""
    maildir = rig.peer.dovecot.maildir(address)
    return [path.read_bytes() for folder in ("new", "cur") if (maildir / folder).is_dir()
            for path in sorted((maildir / folder).iterdir())]


# --------------------------------------------------------------------------- attachments


async def test_homework_attachments_are_kept_in_the_blob_store_and_handed_on_as_media(email_rig):
    await email_rig.start()
    learner = email_rig.learner()
    mail = email_rig.mail(learner, "my homework, photo and PDF")
    mail.add_attachment(PNG, maintype="image", subtype="png", filename="page 1.png")
    mail.add_attachment(PDF, maintype="application", subtype="pdf", filename="../../worksheet.pdf")
    await email_rig.send(mail)
    await email_rig.replies(learner, 1)
    [turn] = email_rig.responder.turns
    media = [e for e in turn.messages[0].elements if isinstance(e, Media)]
    assert [(m.kind, m.name, m.mime_type, m.size) for m in media] == [
        ("image", "page 1.png", "image/png", len(PNG)), ("file", "worksheet.pdf", "application/pdf", len(PDF))]
    for element, content in zip(media, (PNG, PDF), strict=True):  # in the blob store, by hash: no name on disk
        assert element.blob is not None and await email_rig.gateway.blobs.get(element.blob) == content
    assert turn.messages[0].text.startswith("my homework, photo and PDF")


async def test_files_in_a_reply_travel_as_mime_parts(email_rig, tmp_path):
    sheet = tmp_path / "solutions.pdf"
    sheet.write_bytes(PDF)
    email_rig.responder.answer = lambda turn: "Here are the solutions."
    email_rig.responder.attachments = (
        Attachment(kind="file", path=str(sheet), name="solutions.pdf", mime_type="application/pdf"),
        Attachment(kind="image", url="https://example.org/graph.png", name="graph.png"),
    )
    await email_rig.start()
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "solutions please"))
    [seen] = await email_rig.replies(learner, 1)
    [mail] = email_rig.received(learner)
    parts = list(mail.iter_attachments())
    assert [p.get_content_type() for p in parts] == ["application/pdf", "message/external-body"]
    assert parts[0].get_filename() == "solutions.pdf" and parts[0].get_content() == PDF
    assert parts[1].get_param("URL") == "https://example.org/graph.png"
    assert seen.attachments == ("solutions.pdf", "https://example.org/graph.png")
    assert "https://example.org/graph.png" in mail.get_body(preferencelist=("plain",)).get_content()



async def test_mail_is_parsed_and_saved_off_the_event_loop(email_rig, monkeypatch):
    """Parsing a mail near max_message_bytes and writing its attachments takes about a second; on the event
    loop that every channel shares, that second stalled them all (0.85 s for a 24 MB mail, measured)."""
    import base64
    import threading

    import channels.email.channel as channel_module

    threads: dict[str, threading.Thread] = {}
    marker = base64.b64encode(PDF)[:40]  # only the learner's mail carries the file itself

    def noting(name, work):
        def run(*args, **kwargs):
            if marker in args[1 if name == "decode" else 0]:  # the learner's mail, not the peer reading replies
                threads[name] = threading.current_thread()
            return work(*args, **kwargs)
        return run

    monkeypatch.setattr(channel_module.email, "message_from_bytes", noting("parse", channel_module.email.message_from_bytes))
    monkeypatch.setattr(channel_module, "decode", noting("decode", channel_module.decode))
    await email_rig.start()
    learner = email_rig.learner()
    mail = email_rig.mail(learner, "my scanned homework")
    mail.add_attachment(PDF, maintype="application", subtype="pdf", filename="scan.pdf")
    await email_rig.send(mail)
    await email_rig.replies(learner, 1)
    assert set(threads) == {"parse", "decode"}
    assert threading.main_thread() not in threads.values()


async def test_files_for_a_reply_are_read_off_the_event_loop(email_rig, tmp_path, monkeypatch):
    """A reply's files are read while composing it; with read_bytes on the event loop, a large one
    stalled every channel meanwhile."""
    import threading
    from pathlib import Path

    sheet = tmp_path / "solutions.pdf"
    sheet.write_bytes(PDF)
    readers: list[threading.Thread] = []
    original = Path.read_bytes

    def noting(path):
        if path == sheet:
            readers.append(threading.current_thread())
        return original(path)

    monkeypatch.setattr(Path, "read_bytes", noting)
    email_rig.responder.attachments = (Attachment(kind="file", path=str(sheet), name="solutions.pdf"),)
    await email_rig.start()
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "solutions please"))
    await email_rig.replies(learner, 1)
    assert readers and threading.main_thread() not in readers


async def test_a_batch_that_outlasts_the_stall_watch_is_still_taken(email_rig, monkeypatch):
    """The reader showed life only between drains, and the cursor moves once per batch of 25: a batch of
    large mails taking longer than the supervisor's stall watch (90 s) was cancelled as a stall, read
    again from the same cursor, cancelled again -- forever."""
    from channels.email.channel import EmailChannel
    from gateway.supervisor import Supervisor

    start, read = Supervisor.start, EmailChannel._read

    def quick_watch(self, name, factory, *, stall_after=None, **options):
        return start(self, name, factory, stall_after=2.0 if stall_after else None, **options)

    async def slow_read(self, *args, **kwargs):
        await asyncio.sleep(0.8)
        return await read(self, *args, **kwargs)

    monkeypatch.setattr(Supervisor, "start", quick_watch)
    monkeypatch.setattr(EmailChannel, "_read", slow_read)
    learner = email_rig.learner()
    for page in range(4):  # waiting before the first start: one batch
        await email_rig.send(email_rig.mail(learner, f"page {page}", subject=f"Page {page}"))
    await email_rig.start()
    await eventually(lambda: sum(len(t.messages) for t in email_rig.responder.turns) == 4,
                     what="all four mails taken")
    [account] = (await email_rig.gateway.status()).accounts
    assert account.restarts == 0

# --------------------------------------------------------------------------- bad input


async def test_huge_and_broken_mail_gets_a_reason_and_the_next_mail_is_still_answered(email_rig, caplog):
    caplog.set_level(logging.INFO, logger="gateway.pipeline.ingest")  # refusals are routine: logged at info
    await email_rig.start(max_message_bytes=4096)
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "x " * 5000, subject="huge"))
    no_sender = email_rig.mail(learner, "who am I?")
    del no_sender["From"]
    no_sender["From"] = "undisclosed-recipients:;"
    await asyncio.to_thread(_send_raw, email_rig, learner, no_sender.as_bytes())
    broken = (f"From: {learner}\r\nTo: {email_rig.bot}\r\nSubject: =?utf-8?q?broken=ZZ?=\r\n"
              f"Message-ID: {make_msgid(domain='school.test')}\r\nMIME-Version: 1.0\r\n"
              "Content-Type: multipart/mixed\r\n\r\n--nowhere\r\nContent-Transfer-Encoding: base64\r\n"
              "Content-Type: text/plain; charset=no-such-charset\r\n\r\n@@not base64@@\r\n").encode()
    await asyncio.to_thread(_send_raw, email_rig, learner, broken)
    await email_rig.send(email_rig.mail(learner, "a normal question", subject="normal"))

    await eventually(lambda: any(t.messages[0].text == "a normal question" for t in email_rig.responder.turns),
                     what="the normal mail to be answered")
    await email_rig.quiet()
    assert "over max_message_bytes (4096)" in caplog.text
    assert "email without a sender address" in caplog.text
    assert email_rig.refused("too large") == 1
    assert email_rig.refused() >= 2
    # the broken one is either answered from what could be read, or refused with a reason: never a crash
    [account] = (await email_rig.gateway.status()).accounts
    assert account.state == "running" and account.restarts == 0


def _send_raw(rig, login: str, raw: bytes) -> None:
    import smtplib

    with smtplib.SMTP("127.0.0.1", rig.peer.smtp_port, timeout=HTTP_S) as client:
        client.login(login, rig.peer.password)
        client.sendmail(login, [rig.bot], raw)


# --------------------------------------------------------------------------- encryption


@pytest.mark.parametrize("smtp_security", ["starttls", "tls"])
async def test_imap_over_tls_and_smtp_over_starttls_or_tls(email_rig, smtp_security):
    """The secure settings teachers use, against the peer's TLS listeners with its own CA."""
    peer = email_rig.peer
    smtp_port = peer.smtp.starttls_port if smtp_security == "starttls" else peer.smtp.tls_port
    await email_rig.start(imap_port=peer.imaps_port, imap_security="tls", smtp_port=smtp_port,
                          smtp_security=smtp_security, tls_ca_file=str(peer.ca_file))
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "is this private?"))
    [seen] = await email_rig.replies(learner, 1)
    assert "echo: is this private?" in seen.text


async def test_a_server_certificate_the_ca_does_not_vouch_for_is_refused(email_rig, tmp_path):
    from tests.peers.email_peer import make_certificate

    stranger, _ = make_certificate(tmp_path / "other-ca")
    gateway = await email_rig.start(imap_port=email_rig.peer.imaps_port, imap_security="tls", tls_ca_file=str(stranger))

    async def failing():
        [account] = (await gateway.status()).accounts
        return account if account.state == "error" else None

    account = await eventually(failing, what="the account to refuse the server's certificate")
    assert "CERTIFICATE_VERIFY_FAILED" in account.reason or "certificate" in account.reason.lower()


# --------------------------------------------------------------------------- waiting for mail


async def test_idle_push_is_picked_up_without_waiting_for_a_poll(email_rig):
    # Neither a poll (80 s) nor an IDLE renewal (60 s) falls inside the 15 s the reply is waited for.
    await email_rig.start(idle=True, poll_interval_s=80, idle_renew_s=60)
    await asyncio.sleep(0.5)  # the reader has drained the empty inbox and is idling
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "are you awake?"))
    await email_rig.replies(learner, 1)


async def test_with_idle_off_the_mailbox_is_polled(email_rig):
    await email_rig.start(idle=False, poll_interval_s=0.3)
    learner = email_rig.learner()
    for n in range(2):
        await email_rig.send(email_rig.mail(learner, f"poll me {n}", subject=f"P{n}"))
    await email_rig.replies(learner, 2)


async def test_a_server_without_idle_is_polled(email_rig, caplog):
    """The peer's second IMAP listener (127.0.0.2) serves the same mailboxes without announcing IDLE."""
    caplog.set_level(logging.INFO, logger="channels.email.channel")
    await email_rig.start(imap_host="127.0.0.2", imap_port=email_rig.peer.dovecot.noidle_port, idle=True, poll_interval_s=0.3)
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "no push here"))
    await email_rig.replies(learner, 1)
    assert "idle=False" in caplog.text


# --------------------------------------------------------------------------- cursors and restarts


async def test_a_restart_answers_mail_that_came_meanwhile_and_nothing_twice(email_rig):
    await email_rig.start()
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "before", subject="A"))
    await email_rig.replies(learner, 1)
    await email_rig.quiet()
    await email_rig.stop()
    await email_rig.send(email_rig.mail(learner, "while you were away", subject="B"))
    await email_rig.start()
    await email_rig.replies(learner, 2)
    await email_rig.quiet()
    await asyncio.sleep(1)  # room for a wrong second answer to show up
    assert len(email_rig.received(learner)) == 2
    assert [t.messages[0].text for t in email_rig.responder.turns] == ["before", "while you were away"]


async def test_a_mail_the_server_cannot_serve_is_passed_over_and_the_mail_after_it_is_answered(email_rig, caplog):
    """Dovecot breaks the session on every FETCH of a mail whose file it cannot read: after
    ``max_fetch_attempts`` runs that broke there, that mail is recorded as unreadable and passed over."""
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "a mail the server cannot read", subject="Damaged"))
    await email_rig.send(email_rig.mail(learner, "the question after it", subject="Later"))
    maildir = email_rig.peer.dovecot.maildir(email_rig.bot)

    def damaged():
        return [f for f in maildir.glob("*/*") if f.is_file() and b"Subject: Damaged" in f.read_bytes()]

    [broken] = await eventually(damaged, what="the mail to be delivered")
    broken.chmod(0)  # Dovecot reads mail as vmail; root (the test) still can
    try:
        await email_rig.start(max_fetch_attempts=2)
        await email_rig.replies(learner, 1)
        await email_rig.quiet()
    finally:
        for mail in maildir.glob("*/*"):  # Dovecot renames a file it marks seen (new/ -> cur/)
            mail.chmod(0o600)
    assert [t.messages[0].text for t in email_rig.responder.turns] == ["the question after it"]
    assert len(email_rig.received(learner)) == 1
    assert email_rig.refused("invalid event") == 1
    assert "the server broke off 2 times while sending this mail" in caplog.text
    [account] = (await email_rig.gateway.status()).accounts
    assert account.restarts == 2


async def test_a_changed_uidvalidity_rereads_the_mailbox_without_answering_twice(email_rig, caplog):
    await email_rig.start()
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "first", subject="A"))
    await email_rig.replies(learner, 1)
    await email_rig.quiet()
    await email_rig.stop()
    dovecot = email_rig.peer.dovecot
    before = dovecot.doveadm("mailbox", "status", "-u", email_rig.bot, "uidvalidity", "INBOX").split("=")[1].strip()
    await asyncio.to_thread(dovecot.doveadm, "mailbox", "update", "--uid-validity", str(int(before) + 7), "-u", email_rig.bot, "INBOX")
    await email_rig.send(email_rig.mail(learner, "second", subject="B"))
    await email_rig.start()
    await email_rig.replies(learner, 2)
    await email_rig.quiet()
    assert "UIDVALIDITY changed" in caplog.text
    assert counter(email_rig.gateway, "partners_dedup_hits_total", channel="email") >= 1  # "first" was read again
    assert [t.messages[0].text for t in email_rig.responder.turns] == ["first", "second"]
    assert len(email_rig.received(learner)) == 2


async def test_uidvalidity_changing_under_a_running_reader_is_survived(email_rig, caplog):
    """Dovecot drops the session when the mailbox's UIDVALIDITY changes; the reader comes back and re-reads."""
    await email_rig.start()
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "first", subject="A"))
    await email_rig.replies(learner, 1)
    await email_rig.quiet()
    dovecot = email_rig.peer.dovecot
    await asyncio.to_thread(dovecot.doveadm, "mailbox", "update", "--uid-validity", "977", "-u", email_rig.bot, "INBOX")
    await email_rig.send(email_rig.mail(learner, "second", subject="B"))
    await email_rig.replies(learner, 2)
    await email_rig.quiet()
    assert "UIDVALIDITY changed" in caplog.text
    assert counter(email_rig.gateway, "partners_dedup_hits_total", channel="email") >= 1
    assert [t.messages[0].text for t in email_rig.responder.turns] == ["first", "second"]
    assert len(email_rig.received(learner)) == 2


async def test_mail_without_a_message_id_is_known_by_its_bytes_when_read_again(email_rig):
    await email_rig.start()
    learner = email_rig.learner()
    raw = f"From: {learner}\r\nTo: {email_rig.bot}\r\nSubject: no id\r\n\r\nno message id here\r\n".encode()
    await asyncio.to_thread(_send_raw, email_rig, learner, raw)
    await email_rig.replies(learner, 1)
    await email_rig.quiet()
    [turn] = email_rig.responder.turns
    assert turn.messages[0].event_id.startswith("sha256:")
    assert turn.messages[0].address.conversation.thread == turn.messages[0].event_id
    await email_rig.stop()
    dovecot = email_rig.peer.dovecot
    await asyncio.to_thread(dovecot.doveadm, "mailbox", "update", "--uid-validity", "4242", "-u", email_rig.bot, "INBOX")
    await email_rig.start()  # re-reads the mailbox: the stored mail hashes the same
    await eventually(lambda: counter(email_rig.gateway, "partners_dedup_hits_total", channel="email") >= 1,
                     what="the re-read mail to be recognised")
    await email_rig.quiet()
    assert len(email_rig.responder.turns) == 1 and len(email_rig.received(learner)) == 1


# --------------------------------------------------------------------------- sending


async def test_a_retry_after_a_lost_answer_carries_the_same_message_id(email_rig):
    """SMTP cannot deduplicate: the server posted the mail but said 451, the retry posts it again.
    What the channel can promise is that both copies are recognisably one message (ADR 0011)."""
    await email_rig.start()
    learner = email_rig.learner()
    email_rig.peer.smtp.fail_next("451 4.3.0 Temporary failure after queueing", sender=email_rig.bot, after_delivery=True)
    await email_rig.send(email_rig.mail(learner, "did it arrive?"))
    await email_rig.replies(learner, 2)
    one, two = email_rig.received(learner)
    assert str(one["Message-ID"]) == str(two["Message-ID"])
    assert len(email_rig.responder.turns) == 1
    assert str(one["Message-ID"]).endswith(f".partners@{email_rig.peer.domain}>")


async def test_a_key_the_server_accepted_is_never_submitted_again(email_rig):
    await email_rig.start()
    learner = email_rig.learner()
    await email_rig.send(email_rig.mail(learner, "hi"))
    await email_rig.replies(learner, 1)
    target = email_rig.responder.turns[0].messages[0].address
    part = RenderedPart(index=0, text="<p>once</p>")
    first = await email_rig.channel.send(target, part, referrer=Referrer(), idempotency_key="direct-1")
    again = await email_rig.channel.send(target, part, referrer=Referrer(), idempotency_key="direct-1")
    assert first == again
    await email_rig.replies(learner, 2)
    await asyncio.sleep(0.5)
    assert len(email_rig.received(learner)) == 2
    assert str(email_rig.received(learner)[1]["Subject"]) == "A message from your study partner"


async def test_a_reply_to_an_address_the_email_package_refuses_is_a_bad_request(email_rig):
    await email_rig.start()
    target = Address(channel=ChannelName("email"), account=AccountId("inbox"),
                     conversation=Conversation(chat=ChatId("ann@school.test\r\nBcc: eve@evil.test"), kind=ConversationKind.DIRECT))
    with pytest.raises(BadRequest, match="cannot compose the reply"):
        await email_rig.channel.send(target, RenderedPart(index=0, text="<p>hi</p>"), referrer=Referrer(), idempotency_key="bad")


async def test_a_wrong_password_is_reported_as_auth_failed(email_rig, monkeypatch):
    monkeypatch.setenv("EMAIL_WRONG_PASSWORD", "not-the-password")
    gateway = await email_rig.start(password="env:EMAIL_WRONG_PASSWORD")

    async def stuck():
        [account] = (await gateway.status()).accounts
        return account if account.state == "action_required" else None

    account = await eventually(stuck, what="the account to ask for a human after the failed login")
    assert "IMAP login refused" in account.reason
    target = Address(channel=ChannelName("email"), account=AccountId("inbox"),
                     conversation=Conversation(chat=ChatId(email_rig.learner()), kind=ConversationKind.DIRECT))
    with pytest.raises(AuthFailed) as caught:  # the SMTP server refuses the same password
        await email_rig.channel.send(target, RenderedPart(index=0, text="<p>hi</p>"), referrer=Referrer(), idempotency_key="k")
    assert caught.value.platform == "email" and caught.value.code == 535
