"""A QQ dispatch (op 0) -> InboundMessage.

Four events carry a learner's words (Q2), each to its own kind of chat, and
the chat id says which, because the answer goes to a different path for each
(transport.py) -- a direct chat's is the learner's openid alone, so a teacher
named by ``user: <openid>`` in ``owners`` is that chat::

    C2C_MESSAGE_CREATE       a direct chat with the bot       <user_openid>
    GROUP_AT_MESSAGE_CREATE  a group message that @-s the bot  group:<group_openid>
    AT_MESSAGE_CREATE        a guild channel message @-ing it  channel:<channel_id>
    DIRECT_MESSAGE_CREATE    a guild direct message            dms:<guild_id>

The event id is the message's ``id``: QQ posts an event again when it got no
answer in 3 s, with the same message, so every copy lands on one dedup key.
That id is also the ``msg_id`` a passive reply names (Referrer.message), and
the message's ``timestamp`` opens the reply window (60 min direct, 5 min
group; platforms.toml).  Groups deliver only messages that @ the bot, so each
is addressed.  Any other event (a member joined, a reaction) is acknowledged
and recorded as refused.

A message's ``attachments`` (a photo of homework, a file, a voice note) each
name a ``content_type`` and a download ``url`` on QQ's media host (guild ones
without a scheme): decode makes a :class:`MediaRef` of it and nothing more;
the pipeline fetches it after the ack.  A voice note QQ transcribed
(``asr_refer_text``) is read as words.  A message with neither words nor files
is refused.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, ValidationError

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
    Media,
    MediaKind,
    MediaRef,
    MessageId,
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("qq")
MENTION = re.compile(r"<@!?\w+>")
"""How a guild message writes an @ (``<@!1234>``); the bot's own is what addressed it, and is not the learner's text."""


class Skipped(Exception):
    """An event that is nothing to answer: acknowledged, recorded as refused."""


class Author(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str = ""
    user_openid: str = ""
    member_openid: str = ""
    username: str = ""


class Attachment(BaseModel):
    model_config = ConfigDict(extra="ignore")
    content_type: str = ""
    url: str = ""
    filename: str = ""
    size: int | None = None
    asr_refer_text: str = ""


class MessageEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str
    content: str = ""
    attachments: list[Attachment] = []
    timestamp: str = ""
    author: Author
    group_openid: str = ""
    channel_id: str = ""
    guild_id: str = ""


ROUTES: dict[str, tuple[str, ConversationKind]] = {
    "C2C_MESSAGE_CREATE": ("", ConversationKind.DIRECT),
    "GROUP_AT_MESSAGE_CREATE": ("group", ConversationKind.GROUP),
    "AT_MESSAGE_CREATE": ("channel", ConversationKind.GROUP),
    "DIRECT_MESSAGE_CREATE": ("dms", ConversationKind.DIRECT),
}
"""Event type -> the chat id's prefix and the conversation's kind."""


def _received(stamp: str) -> datetime:
    """QQ writes ISO 8601 with an offset (``2024-05-01T12:00:00+08:00``); a missing one is now."""
    if not stamp:
        return datetime.now(UTC)
    try:
        when = datetime.fromisoformat(stamp)
    except ValueError:
        raise InvalidEvent(f"qq message timestamp {stamp[:40]!r} is not a time") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def decode(event_type: str, data: object, *, account: AccountId) -> InboundMessage:
    """One learner's message; :class:`Skipped` or :class:`InvalidEvent` with the reason otherwise."""
    route = ROUTES.get(event_type)
    if route is None:
        raise Skipped(f"event {event_type[:40]}")
    prefix, kind = route
    try:
        event = MessageEvent.model_validate(data)
    except ValidationError as error:
        raise InvalidEvent(f"qq {event_type}: not a message ({error.error_count()} problems)") from None
    place = {"": event.author.user_openid, "group": event.group_openid, "channel": event.channel_id,
             "dms": event.guild_id}[prefix]
    who = event.author.user_openid or event.author.member_openid or event.author.id
    if not place or not who:
        raise InvalidEvent(f"qq {event_type} {event.id[:40]}: no chat or author")
    said = MENTION.sub("", event.content).strip()
    elements = ((Text(text=said),) if said else ()) + tuple(_attached(a) for a in event.attachments if a.url)
    if not elements:
        raise Skipped(f"{event_type} {event.id[:40]} without text or files")
    return InboundMessage(
        event_id=EventId(event.id),
        address=Address(channel=CHANNEL, account=account,
                        conversation=Conversation(chat=ChatId(f"{prefix}:{place}" if prefix else place), kind=kind)),
        sender=Sender(user=UserId(who), display_name=event.author.username),
        elements=elements,
        referrer=Referrer(message=MessageId(event.id)),
        received_at=_received(event.timestamp),
        addressed=True,
    )


KINDS: dict[str, MediaKind] = {"image": "image", "video": "video", "audio": "audio", "voice": "audio"}


def _kind(content_type: str) -> MediaKind:
    """QQ's ``content_type`` is a MIME type for pictures and videos, ``voice`` or ``file`` otherwise."""
    major = content_type.split("/", 1)[0].lower()
    return KINDS.get(major, "file")


def _attached(attachment: Attachment) -> Element:
    if _kind(attachment.content_type) == "audio" and attachment.asr_refer_text.strip():
        return Text(text=attachment.asr_refer_text.strip())
    url = attachment.url if "://" in attachment.url else f"https://{attachment.url}"
    mime = attachment.content_type if "/" in attachment.content_type else ""
    return Media.inbound(_kind(attachment.content_type), MediaRef(
        locator=url, name=attachment.filename, mime_type=mime, size=attachment.size))
