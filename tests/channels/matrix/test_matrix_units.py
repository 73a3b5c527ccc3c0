"""The Matrix channel's pure parts, without a homeserver: decode, encode, error translation, config."""

from __future__ import annotations

import json

import pytest
from nio import RoomSendError
from pydantic import ValidationError

from channels.matrix.config import MatrixConfig
from channels.matrix.decode import RoomView, Skipped, Unreadable, decode
from channels.matrix.encode import EDIT_FALLBACK_CHARS, edit_content, media_content, plain_body, text_content
from channels.matrix.transport import translate
from gateway.core.errors import AuthFailed, BadRequest, InvalidEvent, NotFound, RateLimited
from gateway.core.messages import AccountId, Attachment, ConversationKind, Mention, Quote, plain_text

ME = "@tutor:example.org"
DM = RoomView(room_id="!dm:example.org", kind=ConversationKind.DIRECT, me=ME, my_names=("Tutor",))
GROUP = RoomView(room_id="!g:example.org", kind=ConversationKind.GROUP, me=ME, my_names=("Tutor",), title="Class")


def event(body="hi", *, sender="@ann:example.org", **content):
    return {"type": "m.room.message", "event_id": "$e1", "sender": sender, "origin_server_ts": 1_700_000_000_000,
            "content": {"msgtype": "m.text", "body": body, **content}}


def run(raw, view=DM, **kwargs):
    return decode(raw, view, account=AccountId("main"), **kwargs)


# --------------------------------------------------------------------------- decode


def test_a_direct_message_is_addressed_and_keeps_its_ids():
    message = run(event("hello there"))
    assert message.text == "hello there" and message.addressed and not message.from_self
    assert message.event_id == "$e1" and message.referrer.message == "$e1"
    assert message.address.conversation.chat == "!dm:example.org"
    assert message.received_at.year == 2023


def test_group_addressing_by_m_mentions_by_name_and_not_by_an_intentional_empty_mention():
    assert not run(event("just chatting"), GROUP).addressed
    pill = run(event("what is x?", **{"m.mentions": {"user_ids": [ME]}}), GROUP)
    assert pill.addressed and plain_text(pill.elements) == "@Tutor what is x?" and pill.text == "what is x?"
    legacy = run(event("Tutor: what is y?"), GROUP)
    assert legacy.addressed and plain_text(legacy.elements) == "@Tutor what is y?" and legacy.text == "what is y?"
    assert run(event(f"hey {ME} there"), GROUP).text == "hey @Tutor there"
    assert not run(event("the tutor said so", **{"m.mentions": {}}), GROUP).addressed
    assert not run(event("tutorial time"), GROUP).addressed  # a name inside a word is no mention


def test_a_real_reply_to_the_bot_addresses_it_and_drops_the_legacy_fallback_lines():
    quoted = {"sender": ME, "content": {"body": "echo: earlier"}}
    raw = event("> <@tutor:example.org> echo: earlier\n\nwhy?", **{"m.relates_to": {"m.in_reply_to": {"event_id": "$q"}}})
    message = run(raw, GROUP, quoted=quoted)
    [quote] = [e for e in message.elements if isinstance(e, Quote)]
    assert quote.is_self and quote.text == "echo: earlier" and message.addressed and message.text == "why?"


def test_a_threaded_message_is_its_own_conversation_and_its_fallback_reply_does_not_address():
    raw = event("in a thread", **{"m.relates_to": {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True,
                                                    "m.in_reply_to": {"event_id": "$bot-said"}}})
    message = run(raw, GROUP, quoted={"sender": ME, "content": {"body": "x"}})
    assert message.address.conversation.thread == "$root"
    assert not message.addressed and not any(isinstance(e, Quote) for e in message.elements)


def test_own_events_notices_edits_state_and_encrypted_events():
    assert run(event("mine", sender=ME)).from_self
    assert run(event("beep", msgtype="m.notice")).sender.is_bot
    with pytest.raises(Skipped, match="only new messages"):
        run(event("* fixed", **{"m.relates_to": {"rel_type": "m.replace", "event_id": "$e0"}}))
    assert run({"type": "m.room.member", "event_id": "$m", "sender": "@a:x", "content": {}}) is None
    with pytest.raises(Unreadable, match="end-to-end encryption is not supported") as refused:
        run({"type": "m.room.encrypted", "event_id": "$x", "sender": "@a:x", "content": {}})
    assert refused.value.rule == "encrypted"


@pytest.mark.parametrize("raw", [
    {"type": "m.room.message", "sender": "@a:x", "origin_server_ts": 1, "content": {"msgtype": "m.text", "body": "x"}},
    event("x", origin_server_ts="soon") | {"origin_server_ts": "soon"},
    event(None),
    {"type": "m.room.message", "event_id": "$e", "sender": "@a:x", "origin_server_ts": 1, "content": []},
], ids=["no-event-id", "bad-timestamp", "body-null", "content-a-list"])
def test_unreadable_events_raise_invalid_event_with_the_reason(raw):
    with pytest.raises(InvalidEvent, match="matrix event"):
        run(raw)


def test_a_mention_of_the_bot_on_a_media_message_addresses_it():
    raw = event("diagram.png", msgtype="m.image", url="mxc://example.org/abc", info={"size": 10, "mimetype": "image/png"},
                **{"m.mentions": {"user_ids": [ME]}})
    message = run(raw, GROUP)
    assert message.addressed and any(isinstance(e, Mention) for e in message.elements)


# --------------------------------------------------------------------------- encode


def test_plain_body_keeps_blocks_lists_and_link_targets():
    markup = '<p>Read <strong>this</strong> <a href="https://x.org/g">guide</a></p>\n<ul>\n<li>a</li>\n<li>b</li>\n</ul><p>1 &lt; 2</p>'
    assert plain_body(markup) == "Read this guide (https://x.org/g)\n\n- a\n- b\n\n1 < 2"


def test_text_content_carries_html_plain_body_and_the_thread_relation():
    content = text_content("<p>hi</p>", thread="$root", reply_to="$asked")
    assert content["format"] == "org.matrix.custom.html" and content["body"] == "hi"
    assert content["m.relates_to"] == {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True,
                                       "m.in_reply_to": {"event_id": "$asked"}}
    assert text_content("<p>hi</p>", reply_to="$asked")["m.relates_to"] == {"m.in_reply_to": {"event_id": "$asked"}}


def test_an_edit_replaces_with_m_new_content_and_cuts_its_fallback_short():
    long = "<p>" + "word " * 1000 + "</p>"
    content = edit_content("$orig", long)
    assert content["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$orig"}
    assert content["m.new_content"]["formatted_body"] == long
    assert len(content["body"]) <= EDIT_FALLBACK_CHARS + 3 and content["body"].startswith("* ")


def test_media_content_posts_mxc_uploads_and_keeps_links_readable():
    uploaded = media_content(Attachment(kind="image", path="/tmp/a.png", mime_type="image/png"), "mxc://h/id", size=3)
    assert uploaded == {"msgtype": "m.image", "body": "a.png", "filename": "a.png", "url": "mxc://h/id",
                        "info": {"mimetype": "image/png", "size": 3}}
    linked = media_content(Attachment(kind="file", url="https://x.org/notes.pdf"), "https://x.org/notes.pdf", size=None)
    assert linked["body"] == "notes.pdf: https://x.org/notes.pdf" and 'href="https://x.org/notes.pdf"' in linked["formatted_body"]


# --------------------------------------------------------------------------- errors and config


@pytest.mark.parametrize("errcode, error, retry", [
    ("M_LIMIT_EXCEEDED", RateLimited, 2500), ("M_UNKNOWN_TOKEN", AuthFailed, None), ("M_FORBIDDEN", AuthFailed, None),
    ("M_NOT_FOUND", NotFound, None), ("M_BAD_JSON", BadRequest, None), ("M_TOO_LARGE", BadRequest, None),
])
def test_nio_error_responses_become_the_gateways_errors(errcode, error, retry):
    translated = translate("send", RoomSendError("nope", errcode, retry))
    assert isinstance(translated, error) and translated.platform == "matrix"
    if retry:
        assert translated.retry_after == 2.5


def base(**settings):
    return {"homeserver": "https://m.example.org", "user_id": ME, **settings}


def test_config_needs_a_way_to_log_in_and_a_fixed_device_for_passwords(monkeypatch):
    monkeypatch.setenv("MX_SECRET", "s3cret")
    with pytest.raises(ValidationError, match="access_token"):
        MatrixConfig(**base())
    with pytest.raises(ValidationError, match="device_id"):
        MatrixConfig(**base(password="env:MX_SECRET"))
    with pytest.raises(ValidationError, match="full MXID"):
        MatrixConfig(**base(access_token="env:MX_SECRET", user_id="tutor"))
    assert MatrixConfig(**base(password="env:MX_SECRET", device_id="GATEWAY")).password.get_secret_value() == "s3cret"


def test_invite_policy_patterns(monkeypatch):
    monkeypatch.setenv("MX_SECRET", "t")
    allowed = MatrixConfig(**base(access_token="env:MX_SECRET", invites="allowed",
                                  invite_from=["@teacher:school.org", "*:class.school.org"]))
    assert allowed.invite_allowed("@teacher:school.org") and allowed.invite_allowed("@kid:class.school.org")
    assert not allowed.invite_allowed("@stranger:evil.org") and not allowed.invite_allowed("@x:notclass.school.org")
    assert not MatrixConfig(**base(access_token="env:MX_SECRET", invites="never")).invite_allowed("@teacher:school.org")


def test_a_part_whose_json_would_outgrow_the_event_limit_goes_as_plain_text():
    markup = "<p>" + "a\n" * 14_000 + "</p>"  # 28 kB of text, but every newline doubles in JSON, twice over
    content = text_content(markup)
    assert "formatted_body" not in content and content["body"].count("a") == 14_000
    edit = edit_content("$orig", markup)
    assert "formatted_body" not in edit["m.new_content"]
    assert text_content("<p>short</p>")["formatted_body"] == "<p>short</p>"
    for event in (content, edit):
        assert len(json.dumps(event, ensure_ascii=False).encode()) < 65_536 - 1_000


def test_only_a_well_formed_mxc_url_becomes_a_download_url():
    """The mxc URL is the sender's: it becomes a path on the homeserver only when it is a server name and
    a media id, so "mxc://[x/y" (which made nio's urlparse raise out of the sync loop) or a path with
    ".." in it is refused with a reason, never fetched."""
    from channels.matrix.media import download_url
    from gateway.core.errors import BadRequest

    assert download_url("https://hs.test/", "mxc://example.org/AbC_1-2") == \
        "https://hs.test/_matrix/client/v1/media/download/example.org/AbC_1-2"
    for bad in ("mxc://[broken/cat", "mxc://example.org/../../admin", "https://example.org/x", "mxc://example.org/a/b"):
        with pytest.raises(BadRequest, match="unreadable mxc URL"):
            download_url("https://hs.test", bad)
