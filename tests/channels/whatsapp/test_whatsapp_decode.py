"""decode.py on its own: what each kind of WhatsApp message becomes, from payloads shaped as Meta documents them."""

from __future__ import annotations

import pytest

from channels.whatsapp.decode import Contact, Message, Skipped, decode, items
from gateway.core.errors import InvalidEvent
from gateway.core.messages import AccountId, Media, Text

ACCOUNT = AccountId("school")
CONTACTS = [Contact.model_validate({"wa_id": "15550001", "profile": {"name": "Ana"}})]


def message(kind: str, content: dict, **extra: str) -> Message:
    return Message.model_validate({"from": "15550001", "id": "wamid.1", "timestamp": "1700000000", "type": kind,
                                   kind: content, **extra})


def test_a_text_is_the_learners_words_in_a_direct_chat_named_by_wa_id():
    decoded = decode(message("text", {"body": "hola"}), CONTACTS, account=ACCOUNT)
    assert decoded.elements == (Text(text="hola"),) and decoded.event_id == "wamid.1"
    assert decoded.address.conversation.chat == "15550001" and decoded.sender.display_name == "Ana"
    assert decoded.referrer.message == "wamid.1" and decoded.received_at.timestamp() == 1700000000


@pytest.mark.parametrize("kind, content, said", [
    ("button", {"text": "Yes", "payload": "YES"}, "Yes"),
    ("interactive", {"type": "button_reply", "button_reply": {"id": "b1", "title": "Next lesson"}}, "Next lesson"),
    ("interactive", {"type": "list_reply", "list_reply": {"id": "l2", "title": "Fractions"}}, "Fractions"),
])
def test_a_button_or_list_reply_is_the_title_the_learner_tapped(kind, content, said):
    assert decode(message(kind, content), CONTACTS, account=ACCOUNT).elements == (Text(text=said),)


@pytest.mark.parametrize("kind, media_kind", [("image", "image"), ("sticker", "image"), ("audio", "audio"),
                                              ("video", "video"), ("document", "file")])
def test_a_file_is_a_media_ref_by_its_id_fetched_later(kind, media_kind):
    content = {"id": "777", "mime_type": "application/octet-stream", "filename": "a.pdf", "caption": "look"}
    [media, *caption] = decode(message(kind, content), CONTACTS, account=ACCOUNT).elements
    assert isinstance(media, Media) and media.kind == media_kind and media.ref is not None
    assert media.ref.locator == "777" and media.blob is None
    assert caption == [Text(text="look")]


@pytest.mark.parametrize("kind, content", [("reaction", {"message_id": "wamid.0", "emoji": "x"}),
                                           ("location", {"latitude": 1.0, "longitude": 2.0}),
                                           ("unsupported", {}), ("text", {"body": "   "})])
def test_what_carries_no_words_or_file_is_skipped_with_the_reason(kind, content):
    with pytest.raises(Skipped):
        decode(message(kind, content), CONTACTS, account=ACCOUNT)


def test_a_time_that_is_not_one_is_invalid():
    with pytest.raises(InvalidEvent):
        decode(message("text", {"body": "hi"}, timestamp="yesterday"), CONTACTS, account=ACCOUNT)


def test_items_reads_each_on_its_own():
    read = items(Message, [{"from": "1", "id": "wamid.a", "type": "text", "text": {"body": "ok"}}, {"id": "no from"}, 7])
    assert isinstance(read[0], Message) and all(isinstance(r, InvalidEvent) for r in read[1:])
