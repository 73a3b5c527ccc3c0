"""Zulip's message objects, as zulip.com/api/get-events documents them, read into the gateway's messages."""

from __future__ import annotations

import pytest

from channels.zulip.decode import Me, decode, parse
from gateway.core.errors import InvalidEvent
from gateway.core.messages import AccountId, ConversationKind, Mention

ME = Me(user_id=100, full_name="Tutor Bot")
ACCOUNT = AccountId("school")


def stream(content: str, flags: list[str] | None = None) -> dict:
    return {"id": 42, "type": "stream", "sender_id": 8, "sender_full_name": "Ada", "stream_id": 3,
            "display_recipient": "algebra", "subject": "homework 3", "content": content, "flags": flags or []}


def private(*people: int, sender: int = 8, content: str = "hi") -> dict:
    return {"id": 43, "type": "private", "sender_id": sender, "sender_full_name": "Ada", "subject": "",
            "display_recipient": [{"id": p, "email": f"u{p}@x", "full_name": f"U{p}"} for p in people],
            "content": content}


@pytest.mark.parametrize("content", ["@**Tutor Bot** what is 2+2?", "@**Tutor Bot|100** what is 2+2?"])
def test_a_mention_by_name_or_by_name_and_id_addresses_the_bot_and_is_taken_out(content):
    message = decode(parse(stream(content, ["mentioned"])), account=ACCOUNT, me=ME)
    assert message.addressed and message.text == "what is 2+2?"
    assert any(isinstance(e, Mention) and e.is_self for e in message.elements)
    assert message.address.conversation.chat == "stream:3" and message.address.conversation.thread == "homework 3"


@pytest.mark.parametrize("content", ["@_**Tutor Bot** said this earlier", "@**all** homework is due", "no mention"])
def test_a_silent_mention_a_wildcard_or_none_does_not_address_the_bot(content):
    flags = ["wildcard_mentioned"] if "all" in content else []
    message = decode(parse(stream(content, flags)), account=ACCOUNT, me=ME)
    assert not message.addressed and message.text == content


def test_flags_from_the_event_are_read_over_those_the_object_carries():
    message = decode(parse(stream("@**Tutor Bot** hi"), flags=["mentioned", "read"]), account=ACCOUNT, me=ME)
    assert message.addressed


def test_a_one_to_one_dm_is_the_other_person_and_a_group_dm_is_everyone():
    one = decode(parse(private(8, 100)), account=ACCOUNT, me=ME)
    assert one.address.conversation.chat == "8" and one.address.conversation.kind is ConversationKind.DIRECT
    assert one.addressed and one.event_id == "43"
    group = decode(parse(private(8, 9, 100)), account=ACCOUNT, me=ME)
    assert group.address.conversation.chat == "dm:8,9,100" and group.address.conversation.kind is ConversationKind.GROUP
    assert not group.addressed


def test_the_bots_own_message_is_marked_from_self_and_not_addressed():
    own = decode(parse(private(8, 100, sender=100, content="echo: hi")), account=ACCOUNT, me=ME)
    assert own.from_self and not own.addressed and own.address.conversation.chat == "8"


@pytest.mark.parametrize("raw", [
    {"id": "42", "type": "stream"},
    {**stream("x"), "type": "email"},
    {**stream("x"), "stream_id": None},
    {**private(8, 100), "display_recipient": "not people"},
    "not an object",
])
def test_a_message_that_is_not_one_is_invalid_in_words(raw):
    with pytest.raises(InvalidEvent) as caught:
        decode(parse(raw), account=ACCOUNT, me=ME)
    assert "zulip" in str(caught.value)
