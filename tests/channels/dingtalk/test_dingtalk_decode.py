"""Stream frames and robot messages read, and the bodies written, as DingTalk's documentation shows them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from channels._kit.websocket import FrameKind
from channels.dingtalk.decode import Skipped, decode, envelope
from channels.dingtalk.encode import ReplyToken, card_create, proactive_markdown, title_of, track_id, webhook_markdown
from channels.dingtalk.wire import StreamProtocol
from gateway.core.errors import InvalidEvent
from gateway.core.messages import AccountId, ConversationKind

ACCOUNT = AccountId("school")
NOW = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)


def robot(**over) -> str:
    data = {"msgId": "msgA1", "conversationType": "1", "conversationId": "cidX", "senderStaffId": "staff9",
            "senderId": "$:abc", "senderNick": "Wang", "msgtype": "text", "text": {"content": " 你好 "},
            "sessionWebhook": "https://oapi.dingtalk.com/robot/sendBySession?session=s1",
            "sessionWebhookExpiredTime": 1767600000000, **over}
    return json.dumps(data, ensure_ascii=False)


def test_a_direct_message_is_read_with_its_webhook_in_the_reply_token():
    message = decode(robot(), account=ACCOUNT, now=NOW)
    assert (message.event_id, message.text, message.sender.user) == ("msgA1", "你好", "staff9")
    assert message.address.conversation.chat == "staff9" and message.address.conversation.kind is ConversationKind.DIRECT
    token = ReplyToken.load(message.referrer.token)
    assert token == ReplyToken("https://oapi.dingtalk.com/robot/sendBySession?session=s1", 1767600000000)
    assert message.referrer.expires_at is None  # past the webhook the robot's API still answers


def test_a_group_message_is_the_groups_and_addressed():
    message = decode(robot(conversationType="2", conversationId="cidG"), account=ACCOUNT, now=NOW)
    assert message.address.conversation.chat == "cidG" and message.addressed


@pytest.mark.parametrize("data", ["{}", "[]", "nope", robot(conversationType="3"), robot(senderStaffId="", senderId="")])
def test_what_is_not_a_robot_message_is_invalid(data):
    with pytest.raises(InvalidEvent):
        decode(data, account=ACCOUNT, now=NOW)


def test_a_picture_is_skipped_with_a_reason():
    with pytest.raises(Skipped, match="picture"):
        decode(robot(msgtype="picture", text=None), account=ACCOUNT, now=NOW)


@pytest.mark.parametrize("wire", ["", "{", "[]", json.dumps({"type": "CALLBACK", "headers": {}}),
                                  json.dumps({"type": "OTHER", "headers": {"messageId": "m"}})])
def test_a_frame_without_an_envelope_is_invalid(wire):
    with pytest.raises(InvalidEvent):
        envelope(wire)


def protocol(refused: list) -> StreamProtocol:
    async def endpoint() -> str:
        return "ws://x"

    return StreamProtocol(ACCOUNT, endpoint, heartbeat_interval=30, refused=lambda *said: refused.append(said))


def test_frames_become_acks_after_their_messages():
    refused: list = []
    wire = protocol(refused)
    callback = wire.read(json.dumps({"type": "CALLBACK", "data": robot(),
                                     "headers": {"messageId": "f1", "topic": "/v1.0/im/bot/messages/get"}}))
    assert callback.kind is FrameKind.EVENT and [m.event_id for m in callback.messages] == ["msgA1"]
    assert json.loads(callback.ack or "") == {"code": 200, "message": "OK", "data": json.dumps({"response": None}),
                                              "headers": {"contentType": "application/json", "messageId": "f1"}}
    ping = wire.read(json.dumps({"type": "SYSTEM", "data": '{"opaque":"o1"}', "headers": {"messageId": "p1", "topic": "ping"}}))
    assert not ping.messages and json.loads(json.loads(ping.ack or "")["data"]) == {"opaque": "o1"}
    assert wire.read(json.dumps({"type": "SYSTEM", "headers": {"messageId": "d", "topic": "disconnect"}})).kind \
        is FrameKind.RECONNECT
    broken = wire.read(json.dumps({"type": "CALLBACK", "data": "{}", "headers": {"messageId": "f2",
                                                                                 "topic": "/v1.0/im/bot/messages/get"}}))
    assert broken.invalid and broken.ack and not broken.messages
    picture = wire.read(json.dumps({"type": "CALLBACK", "data": robot(msgtype="picture"),
                                    "headers": {"messageId": "f3", "topic": "/v1.0/im/bot/messages/get"}}))
    assert picture.ack and not picture.messages and refused[0][0] == "dingtalk-msgtype"


def test_markdown_bodies_and_titles():
    assert title_of("## **Photosynthesis** explained for you today") == "Photosynthesis expla…"
    assert webhook_markdown("hi")["markdown"] == {"title": "hi", "text": "hi"}
    path, body = proactive_markdown("robotA", "staff9", group=False, text="你好")
    assert path == "/v1.0/robot/oToMessages/batchSend" and body["userIds"] == ["staff9"]
    assert json.loads(body["msgParam"]) == {"title": "你好", "text": "你好"} and body["msgKey"] == "sampleMarkdown"
    path, body = proactive_markdown("robotA", "cidG", group=True, text="x")
    assert path == "/v1.0/robot/groupMessages/send" and body["openConversationId"] == "cidG"


def test_a_reply_token_knows_when_the_webhook_closes():
    token = ReplyToken("https://h/x", expires_ms=100_000)
    assert token.open_at(50.0) and not token.open_at(99.0)
    assert ReplyToken.load(token.dump()) == token and ReplyToken.load("garbage") is None


def test_a_card_is_delivered_to_the_learner_or_the_group_under_a_stable_track_id():
    from channels.dingtalk.encode import Card

    card = Card(track_id("reply-1"), "content")
    assert track_id("reply-1") == card.track != track_id("reply-2")
    direct = card_create("tpl", card, "robotA", "staff9", group=False)
    assert direct["openSpaceId"] == "dtv1.card//IM_ROBOT.staff9" and direct["imRobotOpenDeliverModel"]["robotCode"] == "robotA"
    group = card_create("tpl", card, "robotA", "cidG", group=True)
    assert group["openSpaceId"] == "dtv1.card//IM_GROUP.cidG" and "imGroupOpenDeliverModel" in group


def test_the_group_budget_and_the_stream_mode_come_from_the_platform_row_and_the_settings(monkeypatch):
    from channels.dingtalk.channel import DingtalkChannel
    from channels.dingtalk.config import DingtalkConfig
    from gateway.core.capabilities import EditMode

    monkeypatch.setenv("DINGTALK_UNIT_SECRET", "Pq4Lx8Zt2Vm6Rw0n")
    plain = DingtalkConfig(client_id="dingA", client_secret="env:DINGTALK_UNIT_SECRET")
    carded = DingtalkConfig(client_id="dingA", client_secret="env:DINGTALK_UNIT_SECRET", card_template_id="tpl.schema")
    assert DingtalkChannel.capabilities_for(plain).edit_mode is EditMode.NONE
    assert DingtalkChannel.capabilities_for(carded).edit_mode is EditMode.NATIVE_STREAM
    rate = DingtalkChannel.capabilities_for(plain).send_rate_chat
    assert rate is not None and (rate.rate, rate.per) == (20, 60)  # what the outbound pacer reads per chat
    assert plain.robot_code == "dingA" and DingtalkChannel.capabilities_for(plain).reply_window_s is None
