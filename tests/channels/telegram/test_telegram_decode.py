"""Decoding Bot API updates (parsed by python-telegram-bot itself) into inbound messages.

The updates are the JSON Telegram sends; these tests pin the addressing rules
privacy mode implies, forum topics, UTF-16 entity offsets and the reasons
undecodable updates are dropped with.
"""

from __future__ import annotations

import pytest
from telegram import Update, User

from channels.telegram.decode import decode
from gateway.core.errors import InvalidEvent
from gateway.core.messages import AccountId, ConversationKind, Media, Mention, Quote, plain_text

ME = User(id=4242, is_bot=True, first_name="Tutor", username="tutor_bot")
LEARNER = {"id": 77, "is_bot": False, "first_name": "Ann"}
GROUP = {"id": -1001, "type": "supergroup", "title": "Class 7b"}


def update(text: str = "", *, chat: dict | None = None, entities: list | None = None, **extra) -> Update:
    message = {"message_id": 10, "date": 1_700_000_000, "chat": chat or {"id": 77, "type": "private", "first_name": "Ann"},
               "from": LEARNER, **extra}
    if text:
        message["text"] = text
    if entities:
        message["entities"] = entities
    return Update.de_json({"update_id": 501, "message": message}, None)


def decoded(u: Update):
    return decode(u, account=AccountId("main"), me=ME)


def test_a_private_message_is_addressed_and_keyed_by_update_id():
    message = decoded(update("hello"))
    assert message.event_id == "501"
    assert message.address.conversation.kind is ConversationKind.DIRECT
    assert message.address.conversation.chat == "77" and message.sender.user == "77"
    assert message.text == "hello" and message.addressed
    assert message.referrer.message == "10"
    assert message.received_at.timestamp() == 1_700_000_000


def test_the_senders_language_code_becomes_the_locale_the_notices_follow():
    assert decoded(update("你好", **{"from": {**LEARNER, "language_code": "zh-hans"}})).sender.locale == "zh-hans"
    assert decoded(update("hello")).sender.locale == ""  # Telegram leaves it out for some users


def test_a_group_message_without_mention_reply_or_command_is_not_addressed():
    message = decoded(update("just chatting", chat=GROUP))
    assert message.address.conversation.kind is ConversationKind.GROUP
    assert not message.addressed


def test_a_mention_of_the_bot_addresses_it_and_keeps_the_space_after_it():
    """Decoding is faithful ("@Tutor_Bot what", never "@Tutor_Botwhat"); the message's
    text sets the leading mention aside (tests/security/test_invisible_input.py)."""
    message = decoded(update("@Tutor_Bot what is a prime?", chat=GROUP,
                             entities=[{"type": "mention", "offset": 0, "length": 10}]))
    assert message.addressed
    [mention] = [e for e in message.elements if isinstance(e, Mention)]
    assert mention.is_self and mention.user == "4242"
    assert plain_text(message.elements) == "@Tutor_Bot what is a prime?"
    assert message.text == "what is a prime?"


def test_a_mention_of_someone_else_does_not_address_the_bot():
    message = decoded(update("@other_bot hi", chat=GROUP, entities=[{"type": "mention", "offset": 0, "length": 10}]))
    assert not message.addressed


def test_entity_offsets_are_utf16_units():
    text = "😀😀 hey @tutor_bot"  # each emoji is two UTF-16 units
    message = decoded(update(text, chat=GROUP, entities=[{"type": "mention", "offset": 9, "length": 10}]))
    assert message.addressed
    assert message.elements[0].text == "😀😀 hey "


def test_a_text_mention_of_the_bot_addresses_it():
    message = decoded(update("Tutor, help", chat=GROUP, entities=[
        {"type": "text_mention", "offset": 0, "length": 5, "user": {"id": 4242, "is_bot": True, "first_name": "Tutor"}}]))
    assert message.addressed


@pytest.mark.parametrize("command, addressed", [("/help", True), ("/help@tutor_bot", True), ("/help@other_bot", False)])
def test_commands_address_the_bot_unless_meant_for_another(command, addressed):
    message = decoded(update(f"{command} fractions", chat=GROUP,
                             entities=[{"type": "bot_command", "offset": 0, "length": len(command)}]))
    assert message.addressed is addressed
    assert message.text == "/help fractions"


def test_a_reply_to_the_bot_addresses_it_and_quotes_what_it_said():
    quoted = {"message_id": 9, "date": 1_700_000_000, "chat": GROUP, "from": ME.to_dict(), "text": "2 + 2 = 4"}
    message = decoded(update("why?", chat=GROUP, reply_to_message=quoted))
    assert message.addressed
    [quote] = [e for e in message.elements if isinstance(e, Quote)]
    assert quote.is_self and quote.message == "9" and quote.text == "2 + 2 = 4"


def test_a_forum_topic_is_its_own_conversation_and_its_root_is_not_a_quote():
    forum = {**GROUP, "is_forum": True}
    root = {"message_id": 3, "date": 1_700_000_000, "chat": forum, "from": LEARNER,
            "forum_topic_created": {"name": "Algebra", "icon_color": 7322096}}
    message = decoded(update("@tutor_bot solve x", chat=forum, message_thread_id=3, is_topic_message=True,
                             reply_to_message=root, entities=[{"type": "mention", "offset": 0, "length": 10}]))
    assert message.address.conversation.thread == "3"
    assert message.address.conversation.key == "-1001/3"
    assert not any(isinstance(e, Quote) for e in message.elements)


def test_a_photo_with_caption_becomes_media_and_words():
    photo = [{"file_id": "small", "file_unique_id": "s", "width": 90, "height": 90, "file_size": 100},
             {"file_id": "big", "file_unique_id": "b", "width": 900, "height": 900, "file_size": 9000}]
    message = decoded(update(photo=photo, caption="my homework"))
    [media] = [e for e in message.elements if isinstance(e, Media)]
    assert media.kind == "image" and media.ref.locator == "big" and media.size == 9000
    assert "my homework" in message.text


def test_a_voice_note_becomes_audio():
    message = decoded(update(voice={"file_id": "v1", "file_unique_id": "v", "duration": 2, "file_size": 10}))
    [media] = message.elements
    assert media.kind == "audio" and media.ref.locator == "v1"


def test_updates_that_are_not_new_messages_are_invalid_with_the_reason():
    edited = Update.de_json({"update_id": 7, "edited_message": {"message_id": 1, "date": 1, "chat": GROUP, "text": "x"}}, None)
    with pytest.raises(InvalidEvent, match="edited_message"):
        decoded(edited)
    post = update("news", chat={"id": -100, "type": "channel", "title": "News"})
    with pytest.raises(InvalidEvent, match="channel post"):
        decoded(post)
    with pytest.raises(InvalidEvent, match="nothing the gateway can read"):
        decoded(update(sticker=None))
