"""AI-bot callbacks as WeCom documents them -> InboundMessage: ids, the leading @-mention, refusals."""

from __future__ import annotations

import pytest

from channels.wecom.decode import Skipped, decode
from gateway.core.errors import InvalidEvent
from gateway.core.messages import AccountId, ConversationKind, Mention


def frame(**body):
    base = {"msgid": "m1", "aibotid": "aib1", "chattype": "single", "from": {"userid": "zhangsan"},
            "msgtype": "text", "text": {"content": "你好"}}
    return {"cmd": "aibot_msg_callback", "headers": {"req_id": "r1"}, "body": {**base, **body}}


def test_a_direct_message_is_keyed_by_msgid_and_answers_through_its_req_id():
    message = decode(frame(), account=AccountId("school"))
    assert message.event_id == "m1" and message.referrer.token == "r1"
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


def test_an_image_is_skipped_with_a_reason_and_a_broken_frame_is_invalid():
    with pytest.raises(Skipped, match="image"):
        decode(frame(msgtype="image", text=None, image={"url": "https://example.org/x"}), account=AccountId("s"))
    with pytest.raises(InvalidEvent):
        decode({"headers": {"req_id": "r"}, "body": {"msgtype": "text"}}, account=AccountId("s"))
    with pytest.raises(InvalidEvent):
        decode(frame(chattype="group"), account=AccountId("s"))  # a group callback without its chatid
