"""Relay update -> InboundMessage.

The event id is the platform's ``update_id``: a redelivered update keeps its
id, so the gateway's (channel, account, event id) dedup key catches it.  In a
group the bot is addressed only when mentioned or replied to; in a direct chat
always.  The platform echoes the bot's own posts back; they are decoded with
``from_self`` so the pipeline can drop them with a reason.
"""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.core.errors import InvalidEvent
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    Element,
    EventId,
    InboundMessage,
    Mention,
    MessageId,
    Quote,
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("relay")


def _elements(text: str, entities: list[dict], me: str) -> list[Element]:
    elements: list[Element] = []
    position = 0
    for entity in sorted(entities, key=lambda e: e["offset"]):
        if entity.get("type") != "mention":
            continue
        start, end = entity["offset"], entity["offset"] + entity["length"]
        if start > position:
            elements.append(Text(text=text[position:start]))
        user = str(entity.get("user_id") or text[start + 1 : end])
        elements.append(Mention(user=UserId(user), display_name=text[start + 1 : end], is_self=user == me))
        position = end
    rest = text[position:]
    if elements and rest.startswith(" "):
        rest = rest[1:]  # the separator after a leading mention is not part of what was said
    if rest:
        elements.append(Text(text=rest))
    return elements


def decode(update: dict, *, account: AccountId, me: str) -> InboundMessage:
    """Decode one update; raise InvalidEvent with the reason when it cannot be."""
    try:
        update_id = update["update_id"]
        message = update["message"]
        chat, sender = message["chat"], message["from"]
        kind = ConversationKind.DIRECT if chat["type"] == "private" else ConversationKind.GROUP
        elements = _elements(message.get("text") or "", message.get("entities") or [], me)
        quoted = message.get("reply_to_message")
        if quoted:
            author = str(quoted["from"]["id"])
            quote = Quote(message=MessageId(str(quoted["message_id"])), text=quoted.get("text", ""),
                          author=UserId(author), is_self=author == me)
            elements.insert(0, quote)
        received_at = datetime.fromtimestamp(float(message["date"]), UTC)
        user = str(sender["id"])
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidEvent(f"relay update without {error!s}: {str(update)[:200]}") from None
    addressed = kind is ConversationKind.DIRECT or any(
        getattr(e, "is_self", False) for e in elements if isinstance(e, (Mention, Quote))
    )
    return InboundMessage(
        event_id=EventId(str(update_id)),
        address=Address(channel=CHANNEL, account=account,
                        conversation=Conversation(chat=ChatId(str(chat["id"])), kind=kind, title=chat.get("title"))),
        sender=Sender(user=UserId(user), display_name=str(sender.get("name", "")), is_bot=bool(sender.get("is_bot"))),
        elements=tuple(elements),
        referrer=Referrer(message=MessageId(str(message["message_id"]))),
        received_at=received_at,
        addressed=addressed,
        from_self=user == me,
    )
