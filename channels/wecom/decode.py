"""AI-bot message callbacks (``aibot_msg_callback``) -> :class:`InboundMessage`.

A callback's body, as WeCom documents it::

    {"msgid": "...", "aibotid": "...", "chatid": "<group only>", "chattype": "single" | "group",
     "from": {"userid": "..."}, "msgtype": "text", "text": {"content": "@bot hi"}}

The dedup key is ``msgid``: WeCom sends a callback again (under a new
``req_id``) when it thinks the first went unanswered, and the inbox answers the
message once.  The frame's ``req_id`` rides along as the referrer: a reply is
an ``aibot_respond_msg`` naming it.  In a group the AI bot is only ever handed
messages that @-mention it, so every group message is addressed; the leading
``@name`` is decoded as a mention of the bot and set aside like on every
channel.

Images and files (``image``/``file``: ``{url, aeskey}``) and mixed messages
(图文混排, ``mixed.msg_item``: text and image items in order) are read too.  A file is
not fetched here: its URL and the message's own AES-256 key (``aeskey``) go into
a :class:`MediaRef` locator (:class:`Download`), and the pipeline fetches it after
the message is durable (``Channel.fetch_media``), as on every channel.  Other types
(voice, video) are refused with a reason rather than answered as empty text.

The referrer's token is the callback's ``req_id`` with the time the callback
arrived (encode.py's :class:`~channels.wecom.encode.ReplyTo`): WeCom's time limit
on the answer's stream counts from the learner's message.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from channels.wecom.encode import ReplyTo
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
    Mention,
    MessageId,
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("wecom")
LEADING_MENTION = re.compile(r"^@(\S+)\s*")


class Skipped(Exception):
    """A callback the gateway reads but does not answer (a message type it cannot show the partner)."""


class _From(BaseModel):
    model_config = ConfigDict(extra="ignore")
    userid: StrictStr


class _Text(BaseModel):
    model_config = ConfigDict(extra="ignore")
    content: StrictStr = ""


class _File(BaseModel):
    """An image or file as the callback names it: where to download it, and the key it is encrypted with."""

    model_config = ConfigDict(extra="ignore")
    url: StrictStr = Field(min_length=1)
    aeskey: StrictStr = ""
    filename: StrictStr = ""


class _Item(BaseModel):
    """One piece of a mixed message: a text or an image."""

    model_config = ConfigDict(extra="ignore")
    msgtype: StrictStr
    text: _Text | None = None
    image: _File | None = None


class _Mixed(BaseModel):
    model_config = ConfigDict(extra="ignore")
    msg_item: list[_Item] = []


@dataclass(frozen=True)
class Download:
    """A :class:`MediaRef` locator: the file's URL and its message's key, kept until the pipeline fetches it."""

    url: str
    aeskey: str

    def dump(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def load(cls, locator: str) -> Download:
        try:
            said = json.loads(locator)
            return cls(url=str(said["url"]), aeskey=str(said["aeskey"]))
        except (ValueError, KeyError, TypeError):
            raise InvalidEvent("wecom media locator is not one this channel made") from None


class Callback(BaseModel):
    """The fields of a message callback the gateway reads; the rest is ignored."""

    model_config = ConfigDict(extra="ignore")
    msgid: StrictStr
    chattype: Literal["single", "group"] = "single"
    chatid: StrictStr | None = None
    sender: _From
    msgtype: StrictStr
    text: _Text | None = None
    image: _File | None = None
    file: _File | None = None
    mixed: _Mixed | None = None

    @classmethod
    def of(cls, body: Any) -> Callback:
        if not isinstance(body, dict):
            raise InvalidEvent("wecom callback without a body")
        try:
            return cls.model_validate({**body, "sender": body.get("from")})
        except ValidationError as error:
            raise InvalidEvent(f"wecom callback is not a message: {error.errors()[0]['msg']}") from None


def elements_of(content: str, group: bool) -> tuple[Element, ...]:
    """A group message starts with ``@<bot name>``: that is a mention of the bot, the rest is the text."""
    found = LEADING_MENTION.match(content) if group else None
    if found is None:
        return (Text(text=content),)
    rest = content[found.end():]
    mention = Mention(user=UserId(found.group(1)), display_name=found.group(1), is_self=True)
    return (mention, Text(text=" " + rest)) if rest else (mention,)


def media_of(kind: MediaKind, file: _File) -> Media:
    ref = MediaRef(locator=Download(file.url, file.aeskey).dump(), name=file.filename)
    return Media.inbound(kind, ref)


def elements_for(body: Callback, group: bool) -> tuple[Element, ...]:
    """The message's elements: its text (the leading @-mention set aside), its images and files in order."""
    if body.msgtype == "text" and body.text is not None:
        return elements_of(body.text.content, group)
    if body.msgtype == "image" and body.image is not None:
        return (media_of("image", body.image),)
    if body.msgtype == "file" and body.file is not None:
        return (media_of("file", body.file),)
    if body.msgtype == "mixed" and body.mixed is not None:
        found: list[Element] = []
        for item in body.mixed.msg_item:
            if item.msgtype == "text" and item.text is not None and item.text.content:
                text = item.text.content
                found.extend(elements_of(text, group) if not found else (Text(text=text),))  # the @ leads the message
            elif item.msgtype == "image" and item.image is not None:
                found.append(media_of("image", item.image))
        if found:
            return tuple(found)
    raise Skipped(f"message type {body.msgtype[:20]} is not read")


def decode(frame: Any, *, account: AccountId, now: datetime | None = None) -> InboundMessage:
    """One callback frame as a message; ``InvalidEvent`` for a frame that is not one, ``Skipped`` for a type not read."""
    if not isinstance(frame, dict):
        raise InvalidEvent("wecom frame is not an object")
    headers = frame.get("headers")
    req_id = headers.get("req_id") if isinstance(headers, dict) else None
    if not isinstance(req_id, str) or not req_id:
        raise InvalidEvent("wecom callback without a req_id")
    body = Callback.of(frame.get("body"))
    group = body.chattype == "group"
    if group and not body.chatid:
        raise InvalidEvent("wecom group callback without a chatid")
    elements = elements_for(body, group)
    chat = ChatId(body.chatid if group and body.chatid else body.sender.userid)
    kind = ConversationKind.GROUP if group else ConversationKind.DIRECT
    received = now or datetime.now(UTC)
    return InboundMessage(
        event_id=EventId(body.msgid),
        address=Address(channel=CHANNEL, account=account, conversation=Conversation(chat=chat, kind=kind)),
        sender=Sender(user=UserId(body.sender.userid)),
        elements=elements,
        referrer=Referrer(message=MessageId(body.msgid), token=ReplyTo(req_id, received.timestamp()).dump()),
        received_at=received,
        addressed=True,  # a DM is addressed; a group hands the AI bot only its @-messages
    )
