"""Email pieces that need no server: screening rules, threading, subjects, composing, error translation, config."""

from __future__ import annotations

import email
import email.policy
import json
from email.message import EmailMessage

import pytest

from channels.email.compose import QUOTE_MARK, Thread, compose, message_id_for, reply_subject
from channels.email.config import EmailConfig
from channels.email.decode import attachments, decode, strip_quoted, thread_root
from channels.email.plaintext import html_to_text
from channels.email.screening import SenderScreen, automatic_reason
from channels.email.smtp import translate_reply
from gateway.configfile import parse_config, validate_account
from gateway.core.config import ConfigError
from gateway.core.errors import AuthFailed, BadRequest, NotFound, PeerUnavailable, RateLimited
from gateway.core.messages import AccountId, Attachment, Media, RenderedPart, plain_text


def mail(sender: str = "ann@school.test", **headers: str) -> EmailMessage:
    message = EmailMessage()
    message["From"] = sender
    message["To"] = "tutor@school.test"
    message["Subject"] = "Homework"
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content("question")
    return message


# --------------------------------------------------------------------------- automatic mail


@pytest.mark.parametrize("headers, sender, reason", [
    ({"Auto_Submitted": "auto-replied"}, "ann@school.test", "Auto-Submitted: auto-replied"),
    ({"Auto_Submitted": "auto-generated; owner=x"}, "ann@school.test", "Auto-Submitted"),
    ({"Precedence": "bulk"}, "ann@school.test", "Precedence: bulk"),
    ({"Precedence": "List"}, "ann@school.test", "Precedence: list"),
    ({"Precedence": "junk"}, "ann@school.test", "Precedence: junk"),
    ({"List_Id": "<maths.school.test>"}, "ann@school.test", "List-Id"),
    ({"Return_Path": "<>"}, "ann@school.test", "empty Return-Path"),
    ({}, "MAILER-DAEMON@school.test", "automatic sender"),
    ({}, "noreply@school.test", "automatic sender"),
    ({}, "no-reply+123@school.test", "automatic sender"),
    ({}, "do_not_reply@school.test", "automatic sender"),
    ({"X_Autoreply": "yes"}, "ann@school.test", "X-Autoreply"),
    ({"X_Auto_Response_Suppress": "All"}, "ann@school.test", "X-Auto-Response-Suppress"),
], ids=["auto-submitted", "auto-generated", "bulk", "list", "junk", "list-id", "bounce", "mailer-daemon",
        "noreply", "no-reply-tagged", "do-not-reply", "x-autoreply", "x-auto-response-suppress"])
def test_automatic_mail_is_recognised(headers, sender, reason):
    found = automatic_reason(mail(sender, **headers), sender.lower())
    assert found is not None and reason in found


def test_a_delivery_report_is_automatic():
    report = mail()
    report.make_mixed()
    report.replace_header("Content-Type", 'multipart/report; report-type=delivery-status; boundary="b"')
    report = email.message_from_bytes(report.as_bytes(), policy=email.policy.default)
    assert "multipart/report" in automatic_reason(report, "ann@school.test")


@pytest.mark.parametrize("headers", [{}, {"Auto_Submitted": "no"}, {"Precedence": "first-class"},
                                     {"Return_Path": "<ann@school.test>"}], ids=["plain", "auto-no", "other-precedence", "return-path"])
def test_mail_a_person_wrote_is_not_automatic(headers):
    assert automatic_reason(mail(**headers), "ann@school.test") is None


def test_allowlist_and_domains_together():
    screen = SenderScreen(("Ann@Other.test",), ("@school.test",), per_hour=100)
    assert screen.refusal("ann@other.test") is None
    assert screen.refusal("bob@school.test") is None
    assert screen.refusal("eve@elsewhere.test").rule == "sender not allowed"
    assert "not in allowed_senders" in screen.refusal("eve@elsewhere.test").detail
    assert SenderScreen((), (), per_hour=100).refusal("anyone@anywhere.test") is None


def test_the_hourly_cap_counts_per_sender_and_forgets_after_an_hour():
    now = [0.0]
    screen = SenderScreen((), (), per_hour=2, clock=lambda: now[0])
    assert screen.refusal("ann@school.test") is None
    assert screen.refusal("ann@school.test") is None
    assert screen.refusal("ann@school.test").rule == "loop protection"
    assert screen.refusal("bob@school.test") is None
    now[0] = 3601.0
    assert screen.refusal("ann@school.test") is None



def test_a_mail_read_again_after_a_restart_counts_once_towards_the_hourly_cap():
    """A run that fails mid-batch (a fetch timing out) re-reads the batch's earlier mail; counted again each
    time, a learner's few mails reached the cap after a few restarts and were refused -- never answered."""
    screen = SenderScreen((), (), per_hour=2)
    for _ in range(5):  # the same two mails, read again after each of five restarts
        assert screen.refusal("ann@school.test", "<q1@school.test>") is None
        assert screen.refusal("ann@school.test", "<q2@school.test>") is None
    assert screen.refusal("ann@school.test", "<q3@school.test>").rule == "loop protection"

# --------------------------------------------------------------------------- threading and decoding


def test_the_thread_root_is_the_first_reference_else_in_reply_to_else_the_mail_itself():
    assert thread_root(mail(References="<root@x> <mid@x>", In_Reply_To="<mid@x>"), "<own@x>") == "<root@x>"
    assert thread_root(mail(In_Reply_To="<parent@x>"), "<own@x>") == "<parent@x>"
    assert thread_root(mail(), "<own@x>") == "<own@x>"


@pytest.mark.parametrize("subject, expected", [
    ("Fractions", "Re: Fractions"), ("Re: Fractions", "Re: Fractions"), ("RE: re: Aw: Fractions", "Re: Fractions"),
    ("Re[2]: Fractions", "Re: Fractions"), ("", "Fallback"), ("Re:", "Fallback"),
])
def test_reply_subjects_have_one_re(subject, expected):
    assert reply_subject(subject, "Fallback") == expected


def test_quoted_history_is_stripped_from_what_the_learner_said():
    text = "And 7 x 9?\n\nOn Mon, 30 Nov 2026 at 10:00, Tutor <t@x> wrote:\n> 56\n> more"
    assert strip_quoted(text) == "And 7 x 9?"
    assert strip_quoted("new words\n> old words\n>") == "new words"
    assert strip_quoted("no quote at all") == "no quote at all"


def test_decoding_carries_what_the_reply_needs(tmp_path):
    message = mail("Ann Lee <Ann@School.test>", Message_ID="<q1@school.test>", References="<r0@school.test>",
                   Reply_To="ann.home@family.test", Date="Mon, 30 Nov 2026 10:00:00 +0000")
    received = decode(message, message.as_bytes(), account=AccountId("inbox"), me="tutor@school.test",
                      media_max_bytes=1000)
    inbound = received.message
    assert inbound.event_id == "<q1@school.test>"
    assert inbound.address.conversation.chat == "ann@school.test"
    assert inbound.address.conversation.thread == "<r0@school.test>"
    assert inbound.sender.display_name == "Ann Lee" and not inbound.from_self
    token = json.loads(inbound.referrer.token)
    assert token["references"] == ["<r0@school.test>", "<q1@school.test>"]
    assert token["reply_to"] == "ann.home@family.test"
    assert token["quote"] == "question" and token["date"].startswith("Mon, 30 Nov 2026")


@pytest.mark.parametrize(("headers", "locale"), [
    ({"Accept_Language": "zh-CN, zh;q=0.9, en;q=0.5"}, "zh-CN"),   # the languages the learner wants answers in
    ({"Content_Language": "zh-Hans"}, "zh-Hans"),                  # else the one they wrote in
    ({"Accept_Language": "en-GB", "Content_Language": "zh"}, "en-GB"),
    ({}, ""),
])
def test_the_mails_language_headers_become_the_senders_locale(headers, locale):
    message = mail()  # set_content drops Content-* headers set before it, so they come after
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    inbound = decode(message, message.as_bytes(), account=AccountId("inbox"), me="t@x.test", media_max_bytes=10).message
    assert inbound.sender.locale == locale


def test_the_content_language_of_the_text_part_counts_too():
    message = mail()
    message.add_attachment(b"x", maintype="application", subtype="octet-stream", filename="a.bin")
    text_part = message.get_body(preferencelist=("plain",))
    text_part["Content-Language"] = "zh-CN"
    inbound = decode(message, message.as_bytes(), account=AccountId("inbox"), me="t@x.test", media_max_bytes=10).message
    assert inbound.sender.locale == "zh-CN"


def test_an_html_only_mail_is_read_as_text(tmp_path):
    message = EmailMessage()
    message["From"] = "ann@school.test"
    message.set_content("<p>What is <b>pi</b>?</p><p>See <a href='https://ex.test/pi'>this</a></p>", subtype="html")
    inbound = decode(message, message.as_bytes(), account=AccountId("inbox"), me="t@x.test",
                     media_max_bytes=10).message
    assert inbound.text == "What is pi?\n\nSee this (https://ex.test/pi)"


def test_an_attachment_over_the_limit_becomes_a_note_and_its_bytes_are_not_kept():
    message = mail()
    message.add_attachment(b"x" * 50, maintype="application", subtype="pdf", filename="big.pdf")
    message.add_attachment(b"y" * 5, maintype="image", subtype="jpeg", filename="small.jpg")
    elements, parts = attachments(message, max_bytes=10)
    big, small = elements
    assert isinstance(big, Media) and big.missing == "too large (50 bytes > 10 bytes)"
    assert "the learner sent a file (big.pdf) that could not be fetched: too large" in plain_text(elements)
    assert isinstance(small, Media) and small.kind == "image" and small.size == 5 and small.ref is not None
    assert parts == {small.ref.locator: b"y" * 5}


# --------------------------------------------------------------------------- composing


def test_a_composed_reply_has_both_alternatives_threading_and_loop_headers():
    thread = Thread(message="<q1@school.test>", subject="Re: Re: Fractions", references=("<r0@x>", "<q1@school.test>"),
                    date="Mon, 30 Nov 2026 10:00:00 +0000", name="Ann", quote="What is 1/2 + 1/4?")
    part = RenderedPart(index=0, text="<p>It is <strong>3/4</strong>.</p>", plain="It is 3/4.")
    reply = compose(part, thread, sender="tutor@school.test", sender_name="Tutor", to="ann@school.test", bcc=None,
                    idempotency_key="k1:0", fallback_subject="x")
    wire = email.message_from_bytes(reply.as_bytes(), policy=email.policy.default)
    assert wire["Subject"] == "Re: Fractions"
    assert wire["In-Reply-To"] == "<q1@school.test>" and wire["References"] == "<r0@x> <q1@school.test>"
    assert wire["Auto-Submitted"] == "auto-replied" and wire["X-Auto-Response-Suppress"] == "All"
    assert wire["Message-ID"] == message_id_for("k1:0", "school.test") == message_id_for("k1:0", "school.test")
    assert message_id_for("k1:0", "school.test") != message_id_for("k1:1", "school.test")
    plain = wire.get_body(preferencelist=("plain",)).get_content()
    html = wire.get_body(preferencelist=("html",)).get_content()
    assert plain.startswith("It is 3/4.")
    assert "On Mon, 30 Nov 2026 10:00:00 +0000, Ann wrote:\n> What is 1/2 + 1/4?" in plain
    assert QUOTE_MARK in html and "What is 1/2 + 1/4?" in html
    later = compose(RenderedPart(index=1, text="<p>more</p>", plain="more"), thread, sender="tutor@school.test", sender_name="",
                    to="ann@school.test", bcc=None, idempotency_key="k1:1", fallback_subject="x")
    assert "wrote:" not in later.get_body(preferencelist=("plain",)).get_content()  # quoted once, on the first part


def test_html_to_text_keeps_structure_and_link_targets():
    text = html_to_text("<p>One</p><ul><li>a</li><li>b</li></ul><p><a href='https://x.test/'>site</a> &amp; more</p>"
                        "<script>evil()</script>")
    assert text == "One\n\n- a\n- b\n\nsite (https://x.test/) & more"


# --------------------------------------------------------------------------- errors and config


@pytest.mark.parametrize("code, text, error", [
    (535, "5.7.8 Authentication credentials invalid", AuthFailed),
    (530, "5.7.0 Authentication required", AuthFailed),
    (451, "4.7.1 Too many messages, try again in 7 seconds", RateLimited),
    (421, "4.7.0 Try again later, closing connection", RateLimited),
    (421, "4.3.2 Service not available", PeerUnavailable),
    (450, "4.2.1 Mailbox busy", PeerUnavailable),
    (550, "5.1.1 No such user", NotFound),
    (550, "5.7.1 Message rejected as spam", BadRequest),
    (554, "5.6.0 Message refused", BadRequest),
])
def test_smtp_replies_are_translated(code, text, error):
    translated = translate_reply(code, text, "send")
    assert type(translated) is error and translated.platform == "email"
    assert str(code) in str(translated)
    if error is RateLimited:
        assert translated.retry_after == (7 if "7 seconds" in text else 60)


def _account(**overrides):
    raw = {"address": "tutor@school.test", "password": "env:EMAIL_UNIT_PASSWORD", "imap_host": "imap.school.test",
           "smtp_host": "smtp.school.test", **overrides}
    config = parse_config({"channels": {"email": {"inbox": raw}}})
    return validate_account(config, "email", "inbox", EmailConfig)


def test_config_defaults_are_the_secure_provider_ports(monkeypatch):
    monkeypatch.setenv("EMAIL_UNIT_PASSWORD", "app-password")
    settings = _account()
    assert (settings.imap_port, settings.imap_security.value) == (993, "tls")
    assert (settings.smtp_port, settings.smtp_security.value) == (587, "starttls")
    assert settings.login == "tutor@school.test" and settings.password.get_secret_value() == "app-password"


def test_clear_text_is_refused_beyond_loopback(monkeypatch):
    monkeypatch.setenv("EMAIL_UNIT_PASSWORD", "app-password")
    with pytest.raises(ConfigError, match="smtp_security none sends the password in clear text"):
        _account(smtp_security="none")
    assert _account(imap_host="127.0.0.1", imap_security="none").imap_security.value == "none"
    with pytest.raises(ConfigError, match="imap_security none"):
        _account(imap_host="localhost.evil.test", imap_security="none")


def test_a_missing_ca_file_is_a_config_error(monkeypatch, tmp_path):
    monkeypatch.setenv("EMAIL_UNIT_PASSWORD", "app-password")
    with pytest.raises(ConfigError, match="tls_ca_file .* is not a readable file"):
        _account(tls_ca_file=str(tmp_path / "missing.pem"))


def test_a_password_written_into_the_file_is_refused(monkeypatch):
    with pytest.raises(ConfigError, match="read from the environment"):
        _account(password="hunter2")


def test_an_attachment_without_path_or_url_is_left_out():
    part = RenderedPart(index=0, text="<p>x</p>", attachments=(Attachment(kind="file", name="ghost"),))
    reply = compose(part, Thread(), sender="t@x.test", sender_name="", to="a@x.test", bcc=None, idempotency_key="k",
                    fallback_subject="Hello")
    assert list(reply.iter_attachments()) == [] and reply["Subject"] == "Hello" and reply["In-Reply-To"] is None


def test_message_ids_are_ascii_so_replies_can_carry_them_verbatim():
    """In-Reply-To and References go out unencoded; a non-ASCII "id" would make the reply unsendable."""
    assert thread_root(mail(References="<ok@school.test> <ünï@school.test>"), "<own@x>") == "<ok@school.test>"
    assert thread_root(mail(In_Reply_To="<ünï@school.test>"), "<own@x>") == "<own@x>"


def test_a_long_non_latin_attachment_name_is_bounded_and_keeps_its_extension():
    """File systems cap a name at 255 bytes, not characters: 120 CJK characters are 360 bytes, and the
    mail carrying them was dropped as unreadable when saving the file failed."""
    message = mail()
    message.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename="数学作业" * 30 + ".pdf")
    [media], parts = attachments(message, max_bytes=100)
    assert isinstance(media, Media) and media.name.endswith(".pdf") and media.name.startswith("数学作业")
    assert len(media.name.encode()) <= 255
    assert list(parts.values()) == [b"%PDF-1.4"]


def test_html_with_a_long_run_of_blanks_is_flattened_in_linear_time():
    """Stripping blanks before line ends with ``[ \\t]+\\n`` rescanned a run of blanks from each of its
    positions: a mail with a megabyte of spaces held the event loop -- every channel -- for many minutes,
    and again after each restart, since that mail was never accepted."""
    import time

    started = time.perf_counter()
    text = html_to_text("<p>a" + " " * 200_000 + "b</p><p>c  \t</p>")
    assert time.perf_counter() - started < 1.0
    assert text == "a" + " " * 200_000 + "b\n\nc"
