"""The vocabulary survives hostile text: store round trips, flattening, keys."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    Emoji,
    EventId,
    InboundMessage,
    Link,
    Media,
    Mention,
    MessageId,
    Quote,
    Sender,
    Style,
    Text,
    UserId,
    plain_text,
)
from gateway.pipeline.outbox import reply_key

HOSTILE = st.one_of(
    st.text(max_size=300),
    st.sampled_from(
        ["\u200b\u200d\ufeff", "\u202eevil\u202c", "e\u0301\u0301\u0301", "👩🏽‍🔬👨‍👩‍👧‍👦", "```\n<b>", "\x00\x1b[31m", "﷽" * 20]
    ),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=5000, max_size=20000),
)
IDS = st.text(min_size=1, max_size=80)

ELEMENTS = st.one_of(
    st.builds(Text, text=HOSTILE, styles=st.frozensets(st.sampled_from(list(Style)))),
    st.builds(Mention, user=IDS.map(UserId), display_name=HOSTILE, is_self=st.booleans()),
    st.builds(Link, url=HOSTILE, text=HOSTILE),
    st.builds(Media, kind=st.sampled_from(["image", "audio", "video", "file"]), url=st.none() | HOSTILE, name=HOSTILE),
    st.builds(Quote, message=IDS.map(MessageId), text=HOSTILE, is_self=st.booleans()),
    st.builds(Emoji, name=HOSTILE, fallback=HOSTILE),
)


def inbound(elements, chat, user, event, thread=None):
    return InboundMessage(
        event_id=EventId(event),
        address=Address(channel=ChannelName("relay"), account=AccountId("a"),
                        conversation=Conversation(chat=ChatId(chat), kind=ConversationKind.GROUP, thread=thread)),
        sender=Sender(user=UserId(user), display_name=user),
        elements=tuple(elements),
        received_at=datetime.now(UTC),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(ELEMENTS, max_size=6), IDS, IDS, IDS, st.none() | IDS)
def test_inbound_messages_round_trip_through_json_unchanged(elements, chat, user, event, thread):
    message = inbound(elements, chat, user, event, thread)
    again = InboundMessage.model_validate_json(message.model_dump_json())
    assert again == message
    assert again.text == message.text
    assert again.dedup_key == ("relay", "a", event)


@settings(max_examples=150, deadline=None)
@given(st.lists(ELEMENTS, max_size=6))
def test_flattening_keeps_every_text_run_in_order(elements):
    flat = plain_text(elements)
    position = 0
    for element in elements:
        if isinstance(element, Text) and element.text:
            found = flat.find(element.text, position)
            assert found >= 0
            position = found + len(element.text)


@settings(max_examples=100, deadline=None)
@given(IDS, IDS, IDS, st.none() | IDS)
def test_reply_keys_are_stable_and_separate_conversations_and_purposes(chat, event, other, thread):
    address = inbound([], chat, "u", event, thread).address
    assert reply_key(address, event) == reply_key(address, event)
    assert reply_key(address, event) != reply_key(address, event, "notice")
    if other != event:
        assert reply_key(address, event) != reply_key(address, other)
