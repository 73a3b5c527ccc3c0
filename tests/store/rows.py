"""Messages and replies the store tests write: small, distinct, and each built one way."""

from __future__ import annotations

from datetime import UTC, datetime

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
    MessageId,
    OutboundReply,
    Referrer,
    Sender,
    Text,
    UserId,
)


def address(chat: str = "c1", channel: str = "relay", account: str = "a") -> Address:
    return Address(channel=ChannelName(channel), account=AccountId(account),
                   conversation=Conversation(chat=ChatId(chat), kind=ConversationKind.DIRECT))


def message(event: str, chat: str = "c1", user: str = "u1", channel: str = "relay",
            elements: tuple[Element, ...] | None = None, *, from_self: bool = False) -> InboundMessage:
    return InboundMessage(
        event_id=EventId(event), address=address(chat, channel), sender=Sender(user=UserId(user)),
        elements=elements if elements is not None else (Text(text=f"hello {event}"),),
        received_at=datetime.now(UTC), from_self=from_self,
    )


def reply(key: str, chat: str = "c1", markdown: str = "hi", answering: str | None = None) -> OutboundReply:
    referrer = Referrer(message=MessageId(answering)) if answering else Referrer()
    return OutboundReply(idempotency_key=key, target=address(chat), markdown=markdown, referrer=referrer)
