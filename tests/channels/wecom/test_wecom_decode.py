"""AI-bot callbacks as WeCom documents them -> InboundMessage: ids, the leading @-mention, refusals."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from channels.wecom.decode import Download, Skipped, decode
from channels.wecom.encode import ReplyTo, Stream, cut_point, rest_after
from gateway.core.errors import InvalidEvent
from gateway.core.messages import AccountId, ConversationKind, Media, Mention


def frame(**body):
    base = {"msgid": "m1", "aibotid": "aib1", "chattype": "single", "from": {"userid": "zhangsan"},
            "msgtype": "text", "text": {"content": "你好"}}
    return {"cmd": "aibot_msg_callback", "headers": {"req_id": "r1"}, "body": {**base, **body}}


def test_a_direct_message_is_keyed_by_msgid_and_answers_through_its_req_id():
    at = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
    message = decode(frame(), account=AccountId("school"), now=at)
    assert message.event_id == "m1" and message.referrer.token is not None
    assert ReplyTo.load(message.referrer.token) == ReplyTo("r1", at.timestamp())  # the clock of WeCom's time limit
    assert message.address.conversation.chat == "zhangsan"
    assert message.address.conversation.kind is ConversationKind.DIRECT
    assert message.text == "你好" and message.addressed


def test_a_group_message_is_in_the_group_and_its_leading_mention_is_the_bot():
    message = decode(frame(chattype="group", chatid="wrG1", text={"content": "@学习伙伴 什么是名词？"}),
                     account=AccountId("school"))
    assert message.address.conversation.chat == "wrG1"
    assert message.address.conversation.kind is ConversationKind.GROUP
    assert isinstance(message.elements[0], Mention) and message.elements[0].is_self
    assert message.text == "什么是名词？" and message.sender.user == "zhangsan"


def test_a_voice_message_is_skipped_with_a_reason_and_a_broken_frame_is_invalid():
    with pytest.raises(Skipped, match="voice"):
        decode(frame(msgtype="voice", text=None, voice={"content": "hi"}), account=AccountId("s"))
    with pytest.raises(Skipped, match="image"):
        decode(frame(msgtype="image", text=None), account=AccountId("s"))  # an image without its url
    with pytest.raises(InvalidEvent):
        decode({"headers": {"req_id": "r"}, "body": {"msgtype": "text"}}, account=AccountId("s"))
    with pytest.raises(InvalidEvent):
        decode(frame(chattype="group"), account=AccountId("s"))  # a group callback without its chatid


def test_an_image_and_a_file_are_media_to_fetch_by_their_url_and_their_own_key():
    image = decode(frame(msgtype="image", text=None, image={"url": "https://cdn/x", "aeskey": "K1"}), account=AccountId("s"))
    [media] = image.elements
    assert isinstance(media, Media) and media.kind == "image" and media.awaiting_fetch
    assert media.ref is not None and Download.load(media.ref.locator) == Download("https://cdn/x", "K1")
    file = decode(frame(msgtype="file", text=None, file={"url": "https://cdn/f", "aeskey": "K2"}), account=AccountId("s"))
    assert [e.kind for e in file.elements] == ["file"]


def test_a_mixed_group_message_is_its_text_without_the_mention_then_its_image():
    items = [{"msgtype": "text", "text": {"content": "@学习伙伴 这是什么？"}},
             {"msgtype": "image", "image": {"url": "https://cdn/i", "aeskey": "K"}}]
    message = decode(frame(chattype="group", chatid="wrG1", msgtype="mixed", text=None, mixed={"msg_item": items}),
                     account=AccountId("s"))
    assert [e.kind for e in message.elements] == ["mention", "text", "image"]
    assert message.elements[1].text.strip() == "这是什么？"  # type: ignore[union-attr]
    with pytest.raises(Skipped):
        decode(frame(msgtype="mixed", text=None, mixed={"msg_item": []}), account=AccountId("s"))


def test_a_token_or_handle_from_before_the_clock_was_kept_still_reads():
    assert ReplyTo.load("r1") == ReplyTo("r1", None)
    assert Stream.load('{"req_id":"r","id":"s","chat":"c"}') == Stream("r", "s", "c", None)
    with pytest.raises(InvalidEvent):
        ReplyTo.load("{not json")


def test_an_early_finish_keeps_whole_lines_or_words_and_the_rest_is_what_was_not_shown():
    assert cut_point("first line\nsecond li") == "first line\n"
    assert cut_point("one two thr") == "one two "
    assert cut_point("ends with a space ") == "ends with a space "
    assert cut_point("名词是表示") == "名词是表示"  # nothing to cut at: all of it
    assert rest_after("one two ", "one two three.") == "three."
    assert rest_after("one two ", "rewritten entirely") == "rewritten entirely"  # repeated, never lost
