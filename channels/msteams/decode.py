"""A Bot Framework activity -> InboundMessage, and the conversation reference that answers it.

Teams has three kinds of conversation (``conversation.conversationType``)::

    personal    a 1:1 chat with the bot          chat = conversation id (a:...)
    groupChat   a group chat the bot was added to chat = conversation id (19:...@thread.v2)
    channel     a team channel                    chat = channel id, thread = the post's messageid

A channel post's conversation id ends in ``;messageid=<root post>``: that is
its thread, and answers go there (encode.py puts it back).  Group chats and
channels reach the bot only when a learner @-mentions it (without the
resource-specific consent to read everything, TM4), and the mention --
``<at>Tutor</at>`` in the text, a ``mention`` entity naming the bot -- is not
the learner's words: it becomes a self :class:`Mention` and is cut from the
text.  Anything but a ``message`` (conversationUpdate, typing, reactions,
invokes) is acknowledged and recorded as refused; a message with no words
likewise, for this release reads text only.

The event id is the conversation and the activity ``id``: a redelivery of the
activity lands on the same dedup key.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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
    Mention,
    MessageId,
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("msteams")
THREAD = ";messageid="
TAGS = re.compile(r"<[^>]+>")


class Skipped(Exception):
    """An activity that is nothing to answer: acknowledged, recorded as refused."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class Account(_Model):
    id: str = ""
    name: str = ""
    aad_object_id: str = Field(default="", alias="aadObjectId")


class ConversationAccount(_Model):
    id: str
    conversation_type: str = Field(default="personal", alias="conversationType")
    tenant_id: str = Field(default="", alias="tenantId")
    name: str | None = None


class Entity(_Model):
    type: str = ""
    mentioned: Account | None = None
    text: str = ""


class Activity(_Model):
    """The fields of a Bot Framework activity the gateway reads (the schema has many more)."""

    type: str
    id: str = ""
    service_url: str = Field(default="", alias="serviceUrl")
    channel_id: str = Field(default="", alias="channelId")
    timestamp: str = ""
    sender: Account = Field(default_factory=Account, alias="from")
    recipient: Account = Field(default_factory=Account)
    conversation: ConversationAccount
    text: str = ""
    locale: str = ""
    entities: list[Entity] = []


class ConversationRef(_Model):
    """What a later message to the conversation needs (a reminder has no activity to answer)."""

    service_url: str
    conversation: str
    """The full conversation id, thread suffix included."""
    locale: str = ""


def read(body: bytes) -> Activity:
    try:
        return Activity.model_validate_json(body)
    except ValidationError as error:
        raise InvalidEvent(f"msteams webhook: not an activity ({error.error_count()} problems)") from None


def where(conversation_id: str, kind: str) -> tuple[str, str | None]:
    """The chat and thread a conversation id names: a channel post's ``;messageid=`` is its thread."""
    chat, _, thread = conversation_id.partition(THREAD)
    return (chat, thread or None) if kind == "channel" else (conversation_id, None)


def _words(activity: Activity) -> tuple[str, bool, str]:
    """The learner's text, whether it @-mentioned the bot, and the name the bot was mentioned by."""
    text, mentioned, name = activity.text, False, ""
    for entity in activity.entities:
        if entity.type != "mention" or entity.mentioned is None:
            continue
        if entity.mentioned.id == activity.recipient.id:
            mentioned, name = True, entity.mentioned.name
            text = text.replace(entity.text, " ") if entity.text else text
        elif entity.text:
            text = text.replace(entity.text, "@" + TAGS.sub("", entity.text))
    return " ".join(html.unescape(TAGS.sub(" ", text)).split()), mentioned, name


def _received(stamp: str) -> datetime:
    if not stamp:
        return datetime.now(UTC)
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidEvent(f"msteams activity timestamp {stamp[:40]!r} is not a time") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def decode(activity: Activity, *, account: AccountId) -> InboundMessage:
    """One learner's message; :class:`Skipped` or :class:`InvalidEvent` with the reason otherwise."""
    if activity.type != "message":
        raise Skipped(f"activity {activity.type[:40]}")
    if not activity.id or not activity.sender.id:
        raise InvalidEvent("msteams message without id or from.id")
    kind = activity.conversation.conversation_type
    chat, thread = where(activity.conversation.id, kind)
    said, mentioned, name = _words(activity)
    if not said:
        raise Skipped(f"message {activity.id[:40]} without text")
    elements: tuple[Mention | Text, ...] = (Text(text=said),)
    if mentioned:
        elements = (Mention(user=UserId(activity.recipient.id), display_name=name, is_self=True), *elements)
    direct = kind == "personal"
    return InboundMessage(
        event_id=EventId(f"{activity.conversation.id}|{activity.id}"),
        address=Address(channel=CHANNEL, account=account, conversation=Conversation(
            chat=ChatId(chat), thread=thread, title=activity.conversation.name,
            kind=ConversationKind.DIRECT if direct else ConversationKind.GROUP)),
        sender=Sender(user=UserId(activity.sender.id), display_name=activity.sender.name, locale=activity.locale),
        elements=elements,
        referrer=Referrer(message=MessageId(activity.id), token=activity.service_url),
        received_at=_received(activity.timestamp),
        addressed=direct or mentioned,
        from_self=activity.sender.id == activity.recipient.id,
    )
