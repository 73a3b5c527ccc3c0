"""Decoding Feishu's events and encoding its bodies, from the documented shapes."""

from __future__ import annotations

import json

import pytest

from channels.feishu.decode import Skipped, decode
from channels.feishu.encode import Card, post, streaming_card, uuid_of
from gateway.core.errors import InvalidEvent
from gateway.core.messages import AccountId, ConversationKind, Link, Media, Mention, Quote, Text
from tests.peers.feishu_server import BOT_OPEN_ID, event_of

ACCOUNT = AccountId("school")


def test_a_group_text_with_the_bots_mention_is_addressed_and_the_mention_set_aside():
    event = event_of("hi there", user="ou_a", chat="oc_g", group=True, mention=True)
    message = decode(event, account=ACCOUNT, bot=BOT_OPEN_ID)
    assert message.event_id == event["header"]["event_id"] and message.addressed
    assert message.address.conversation.kind is ConversationKind.GROUP and message.address.conversation.chat == "oc_g"
    mention, text = message.elements
    assert isinstance(mention, Mention) and mention.is_self and isinstance(text, Text) and text.text == " hi there"
    assert message.referrer.message == event["event"]["message"]["message_id"] and message.referrer.token == "ou_a"


def test_a_group_message_without_the_bot_is_not_addressed_and_a_dm_always_is():
    assert not decode(event_of("x", user="ou_a", chat="oc_g", group=True, mention=False), account=ACCOUNT, bot=BOT_OPEN_ID).addressed
    dm = decode(event_of("x", user="ou_a", chat="oc_d", group=False, mention=False), account=ACCOUNT, bot=BOT_OPEN_ID)
    assert dm.addressed and dm.referrer.token is None


def test_rich_text_keeps_links_images_and_the_quoted_message():
    content = {"title": "Homework", "content": [[{"tag": "text", "text": "see "}, {"tag": "a", "href": "https://ex.org", "text": "this"}],
                                                [{"tag": "img", "image_key": "img_k1"}]]}
    event = event_of("", user="ou_a", chat="oc_d", group=False, mention=False, message_type="post", content=content)
    event["event"]["message"]["parent_id"] = "om_parent"
    elements = decode(event, account=ACCOUNT, bot=BOT_OPEN_ID).elements
    assert isinstance(elements[0], Quote) and elements[0].message == "om_parent"
    assert any(isinstance(e, Link) and e.url == "https://ex.org" for e in elements)
    [image] = [e for e in elements if isinstance(e, Media)]
    assert image.ref is not None and image.ref.locator.endswith("/image/img_k1") and image.blob is None


def test_a_file_is_named_not_fetched():
    event = event_of("", user="ou_a", chat="oc_d", group=False, mention=False, message_type="file",
                     content={"file_key": "file_k2", "file_name": "essay.pdf"})
    [media] = decode(event, account=ACCOUNT).elements
    assert isinstance(media, Media) and media.kind == "file" and media.name == "essay.pdf"


@pytest.mark.parametrize("broken", [None, [], {"schema": "1.0"}, {"schema": "2.0", "header": {}},
                                    {"schema": "2.0", "header": {"event_id": "e", "event_type": "im.message.receive_v1"}, "event": {}}])
def test_what_is_not_an_event_is_invalid(broken):
    with pytest.raises(InvalidEvent):
        decode(broken, account=ACCOUNT)


def test_content_that_is_not_json_is_invalid_and_other_types_are_skipped():
    event = event_of("x", user="ou_a", chat="oc_d", group=False, mention=False)
    event["event"]["message"]["content"] = "{not json"
    with pytest.raises(InvalidEvent):
        decode(event, account=ACCOUNT)
    sticker = event_of("", user="ou_a", chat="oc_d", group=False, mention=False, message_type="sticker", content={"file_key": "s"})
    with pytest.raises(Skipped):
        decode(sticker, account=ACCOUNT)
    other = {**event, "header": {**event["header"], "event_type": "im.chat.member.bot.added_v1"}}
    with pytest.raises(Skipped):
        decode(other, account=ACCOUNT)


def test_encoded_bodies():
    assert post("**hi**", mention="ou_a") == {"zh_cn": {"content": [[{"tag": "md", "text": '<at user_id="ou_a"></at> **hi**'}]]}}
    card = streaming_card("", mention="ou_a")
    assert card["config"]["streaming_mode"] is True and card["body"]["elements"][-1]["element_id"] == "answer"
    assert uuid_of("k") == uuid_of("k") != uuid_of("k", 1) and len(uuid_of("k")) <= 50
    handle = Card(id="c", message="om", born_ms=5)
    assert Card.load(handle.dump()) == handle
    with pytest.raises(InvalidEvent):
        Card.load(json.dumps({"id": "c"}))
