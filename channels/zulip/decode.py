"""Zulip messages -> :class:`InboundMessage`, from a queue's ``message`` events and from ``GET /messages``.

A message event is ``{"type": "message", "id": <event id>, "message": {...}, "flags": [...]}``;
``GET /messages`` (the catch-up after a lost queue) lists the same message
objects with their ``flags`` inside.  The message object::

    {"id": 42, "type": "stream" | "private", "sender_id": 8, "sender_full_name": "Ada",
     "stream_id": 3, "display_recipient": "algebra" | [{"id": 8, ...}, {"id": 9, ...}],
     "subject": "homework 3", "content": "@**Tutor** what is a prime?"}

Conversations, by what Zulip means by one:

- a one-to-one direct message: the other person's user id (``8``), direct;
- a group direct message: ``dm:<ids>`` (everyone in it, sorted), a group;
- a stream message: ``stream:<stream id>`` with the topic as its thread (stream + topic is the
  conversation, and the answer goes back into that topic), the stream's name as its title.

The dedup key is Zulip's message id, which the queue and the catch-up both carry,
so a message that reaches the gateway both ways is one message.  The bot is
addressed in a one-to-one DM, and elsewhere when Zulip flags the message
``mentioned`` (an ``@**name**`` of the bot; a silent ``@_**name**`` or ``@**all**`` is not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError

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
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("zulip")
STREAM = "stream:"
GROUP_DM = "dm:"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Recipient(_Model):
    id: StrictInt


class ZulipMessage(_Model):
    id: StrictInt
    type: Literal["stream", "private"]
    sender_id: StrictInt
    sender_full_name: str = ""
    content: StrictStr
    display_recipient: StrictStr | list[_Recipient]
    stream_id: StrictInt | None = None
    subject: str = ""
    flags: list[str] = []


@dataclass(frozen=True)
class Me:
    """Who the bot is (``GET /users/me``): its own messages are not answered, its name is its mention."""

    user_id: int
    full_name: str


def _first_error(error: ValidationError) -> str:
    found = error.errors()[0]
    return f"{'.'.join(map(str, found['loc'])) or 'body'}: {found['msg']}"


def parse(raw: Any, flags: Any = None) -> ZulipMessage:
    """A message object (``flags`` from its event, when it came on the queue); ``InvalidEvent`` otherwise."""
    try:
        message = ZulipMessage.model_validate(raw)
    except ValidationError as error:
        raise InvalidEvent(f"zulip message: {_first_error(error)}") from None
    if isinstance(flags, list):
        message = message.model_copy(update={"flags": [str(f) for f in flags]})
    return message


def _mention_pattern(me: Me) -> re.Pattern[str]:
    return re.compile(r"@\*\*" + re.escape(me.full_name) + r"(?:\|" + str(me.user_id) + r")?\*\*")


def _elements(content: str, mentioned: bool, me: Me) -> tuple[Element, ...]:
    """The text, with ``@**<bot's name>**`` taken out as a mention of the bot."""
    pattern = _mention_pattern(me)
    if mentioned or pattern.search(content):
        rest = re.sub(r"[ \t]{2,}", " ", pattern.sub(" ", content)).strip()
        mention = Mention(user=UserId(str(me.user_id)), display_name=me.full_name, is_self=True)
        return (mention, Text(text=rest)) if rest else (mention,)
    return (Text(text=content),)


def conversation_of(message: ZulipMessage, me: Me) -> Conversation:
    if message.type == "stream":
        if message.stream_id is None or not isinstance(message.display_recipient, str):
            raise InvalidEvent(f"zulip stream message {message.id}: no stream_id or stream name")
        return Conversation(chat=ChatId(f"{STREAM}{message.stream_id}"), kind=ConversationKind.GROUP,
                            thread=message.subject or None, title=message.display_recipient)
    if not isinstance(message.display_recipient, list):
        raise InvalidEvent(f"zulip direct message {message.id}: display_recipient is not a list of people")
    people = sorted({r.id for r in message.display_recipient} | {message.sender_id})
    others = [p for p in people if p != me.user_id]
    if len(others) <= 1:
        return Conversation(chat=ChatId(str(others[0] if others else me.user_id)), kind=ConversationKind.DIRECT)
    return Conversation(chat=ChatId(GROUP_DM + ",".join(map(str, people))), kind=ConversationKind.GROUP)


def decode(message: ZulipMessage, *, account: AccountId, me: Me) -> InboundMessage:
    """One Zulip message as the gateway's; the bot's own is marked ``from_self`` (and never answered)."""
    conversation = conversation_of(message, me)
    own = message.sender_id == me.user_id
    direct = conversation.kind is ConversationKind.DIRECT
    mentioned = "mentioned" in message.flags
    elements = (Text(text=message.content),) if own or direct else _elements(message.content, mentioned, me)
    return InboundMessage(
        event_id=EventId(str(message.id)),
        address=Address(channel=CHANNEL, account=account, conversation=conversation),
        sender=Sender(user=UserId(str(message.sender_id)), display_name=message.sender_full_name),
        elements=elements,
        referrer=Referrer(message=MessageId(str(message.id))),
        received_at=datetime.now(UTC),
        addressed=not own and (direct or mentioned or any(isinstance(e, Mention) for e in elements)),
        from_self=own,
    )
