"""Stream-mode frames -> what they mean; a robot message's ``data`` -> :class:`InboundMessage`.

A frame, as DingTalk's Stream protocol documents it, is one JSON text message::

    {"specVersion": "1.0", "type": "SYSTEM" | "EVENT" | "CALLBACK",
     "headers": {"messageId": "...", "topic": "...", "contentType": "application/json", ...},
     "data": "<a JSON document, as a string>"}

Each one is acked with its ``messageId`` (ack.py builds the frame).  A robot
message is a CALLBACK on topic ``/v1.0/im/bot/messages/get`` whose data carries
``msgId`` (the dedup key), ``conversationType`` ("1" a direct chat, "2" a
group), ``conversationId``, ``senderStaffId``/``senderId``, ``senderNick``,
``isInAtList``, ``text.content``, and the ``sessionWebhook`` a reply may use
until ``sessionWebhookExpiredTime`` (epoch ms).  A group hands the robot only
its @-messages.

Files come as ``picture``, ``file``, ``audio``, ``video`` and ``richText`` (text
runs and pictures in order), each file with a ``content.downloadCode``: decode
turns it into a :class:`MediaRef` and nothing more; the pipeline fetches it after
the ack (``messageFiles/download``).  Voice that DingTalk transcribed
(``content.recognition``) is read as the learner's words.  Other types (a shared
link, a card) are refused with a reason, not answered as empty text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from channels.dingtalk.encode import ReplyToken
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

CHANNEL = ChannelName("dingtalk")
BOT_TOPIC = "/v1.0/im/bot/messages/get"
GROUP = "2"


class Skipped(Exception):
    """A robot message the gateway reads but does not answer (a type it cannot show the partner)."""


class _Headers(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    message_id: StrictStr = Field(alias="messageId", min_length=1)
    topic: StrictStr = ""


class Envelope(BaseModel):
    """A frame's outside: enough to ack it and to route it."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["SYSTEM", "EVENT", "CALLBACK"]
    headers: _Headers
    data: StrictStr = ""


@dataclass(frozen=True)
class Unreadable:
    """A frame whose envelope was read (so it can be acked) but whose content could not be."""

    envelope: Envelope
    reason: str


def envelope(wire: str | bytes) -> Envelope:
    """The frame's envelope; ``InvalidEvent`` for a frame that has none (not JSON, no messageId)."""
    try:
        return Envelope.model_validate(json.loads(wire))
    except (ValueError, ValidationError) as error:
        raise InvalidEvent(f"dingtalk frame is not a stream frame: {str(error).splitlines()[0][:120]}") from None


class _Text(BaseModel):
    model_config = ConfigDict(extra="ignore")
    content: StrictStr = ""


class _RichItem(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: StrictStr = ""
    type: StrictStr = ""
    downloadCode: StrictStr = ""


class _Content(BaseModel):
    """``content`` of a file-bearing message (picture, file, audio, video, richText)."""

    model_config = ConfigDict(extra="ignore")
    downloadCode: StrictStr = ""
    fileName: StrictStr = ""
    recognition: StrictStr = ""
    richText: list[_RichItem] = Field(default_factory=list)


FILE_TYPES: dict[str, MediaKind] = {"picture": "image", "file": "file", "audio": "audio", "video": "video"}


class RobotMessage(BaseModel):
    """The fields of a robot message the gateway reads; the rest is ignored."""

    model_config = ConfigDict(extra="ignore")
    msgId: StrictStr = Field(min_length=1)
    conversationType: Literal["1", "2"]
    conversationId: StrictStr = Field(min_length=1)
    senderStaffId: StrictStr = ""
    senderId: StrictStr = ""
    senderNick: StrictStr = ""
    msgtype: StrictStr
    text: _Text | None = None
    content: _Content | None = None
    sessionWebhook: StrictStr = ""
    sessionWebhookExpiredTime: int = 0


def decode(data: str, *, account: AccountId, now: datetime | None = None) -> InboundMessage:
    """One robot message's ``data`` as a message; ``InvalidEvent`` when it is not one, ``Skipped`` for a type not read."""
    try:
        said = RobotMessage.model_validate_json(data)
    except ValidationError as error:
        first = error.errors()[0]
        raise InvalidEvent(f"dingtalk robot message is not one: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    user = said.senderStaffId or said.senderId
    if not user:
        raise InvalidEvent("dingtalk robot message without a sender")
    elements = _elements(said)
    group = said.conversationType == GROUP
    chat = ChatId(said.conversationId if group else user)  # a direct chat is answered by the learner's staff id
    token = ReplyToken(said.sessionWebhook, said.sessionWebhookExpiredTime) if said.sessionWebhook else None
    return InboundMessage(
        event_id=EventId(said.msgId),
        address=Address(channel=CHANNEL, account=account, conversation=Conversation(
            chat=chat, kind=ConversationKind.GROUP if group else ConversationKind.DIRECT)),
        sender=Sender(user=UserId(user), display_name=said.senderNick),
        elements=elements,
        referrer=Referrer(message=MessageId(said.msgId), token=token.dump() if token else None),
        received_at=now or datetime.now(UTC),
        addressed=True,  # a direct chat is addressed; a group hands the robot only its @-messages
    )


def _elements(said: RobotMessage) -> tuple[Element, ...]:
    """What the learner sent, in order; ``Skipped`` for a type the gateway does not read."""
    if said.msgtype == "text" and said.text is not None:
        return (Text(text=said.text.content.strip()),)
    content = said.content or _Content()
    if said.msgtype == "richText":
        parts: list[Element] = []
        for item in content.richText:
            if item.downloadCode:
                parts.append(Media.inbound("image", MediaRef(locator=item.downloadCode)))
            elif item.text.strip():
                parts.append(Text(text=item.text.strip()))
        if parts:
            return tuple(parts)
    elif said.msgtype == "audio" and content.recognition.strip():
        return (Text(text=content.recognition.strip()),)
    elif said.msgtype in FILE_TYPES and content.downloadCode:
        ref = MediaRef(locator=content.downloadCode, name=content.fileName)
        return (Media.inbound(FILE_TYPES[said.msgtype], ref),)
    raise Skipped(f"message type {said.msgtype[:20]} is not read")


def payload(data: str) -> Any:
    """A frame's ``data`` as JSON (a SYSTEM ping's, echoed in its ack)."""
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None
