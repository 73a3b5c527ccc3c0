"""An Official Account callback's fields -> InboundMessage.

The event id is the message's ``MsgId``: WeChat retries a callback it got no
answer to three times with the same ``MsgId`` (X1), so every copy lands on one
dedup key and is answered once.  Events carry no ``MsgId``; their identity is
``FromUserName`` + ``CreateTime`` (X1), which is what a retried event repeats.

An Official Account talks to one person at a time: the conversation is the
learner's OpenID (``FromUserName``), which is also where a customer-service
message goes.  ``CreateTime`` is when the learner spoke, so the 48-hour window
opens there.  Text is read as it comes (WeChat has no markup); ``subscribe``
(a learner followed the account) is read as their first word, ``/start``
(ADR 0014); any other message type or event is acknowledged and recorded as
refused -- the account still answers ``success``, so WeChat stops retrying.
"""

from __future__ import annotations

from collections.abc import Mapping

from channels._kit.wechat_xml import created_at, required
from gateway.core.errors import InvalidEvent
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    MessageId,
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("weixin")
FIRST_WORD = "/start"
"""What following the account says to the gateway: the learner's first contact."""


class Skipped(Exception):
    """A callback that is nothing to answer (a location, a menu click): answered ``success``, recorded as refused."""


def _field(fields: Mapping[str, str], name: str) -> str:
    return required(fields, name, source="weixin callback")


def decode(fields: Mapping[str, str], *, account: AccountId) -> InboundMessage:
    """One text message or subscribe event; :class:`Skipped` or :class:`InvalidEvent` with the reason otherwise."""
    kind = _field(fields, "MsgType")
    learner, stamp = _field(fields, "FromUserName"), _field(fields, "CreateTime")
    received = created_at(stamp, platform="weixin")
    if kind == "text":
        event_id, said = _field(fields, "MsgId"), fields.get("Content", "")
        if not said.strip():
            raise InvalidEvent(f"weixin text message {event_id} has no Content")
    elif kind == "event" and fields.get("Event", "").lower() == "subscribe":
        event_id, said = f"{learner}:{stamp}", FIRST_WORD
    elif kind == "event":
        raise Skipped(f"event {fields.get('Event', '')[:30]}")
    else:
        raise Skipped(f"message type {kind[:30]}")
    return InboundMessage(
        event_id=EventId(event_id),
        address=Address(channel=CHANNEL, account=account,
                        conversation=Conversation(chat=ChatId(learner), kind=ConversationKind.DIRECT)),
        sender=Sender(user=UserId(learner)),
        elements=(Text(text=said),),
        referrer=Referrer(message=MessageId(event_id), token=fields.get("ToUserName") or None),
        received_at=received,
        addressed=True,
    )
