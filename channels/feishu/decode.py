"""``im.message.receive_v1`` events (schema 2.0) -> :class:`InboundMessage`.

The event, as Feishu documents it (the same over the long connection and the webhook)::

    {"schema": "2.0", "header": {"event_id", "event_type": "im.message.receive_v1", "token", ...},
     "event": {"sender": {"sender_id": {"open_id"}, "sender_type": "user"},
               "message": {"message_id", "chat_id", "chat_type": "p2p" | "group", "thread_id"?,
                           "parent_id"?, "message_type", "content": "<JSON text>",
                           "mentions": [{"key": "@_user_1", "id": {"open_id"}, "name"}]}}}

The dedup key is ``header.event_id``: Feishu sends an event again (15 s, 5 min, 1 h, 6 h) until it is
acknowledged, under the same id.  ``content`` is itself JSON, by ``message_type``: ``text`` (``text``,
mentions as ``@_user_N`` placeholders), ``post`` (rich text: paragraphs of ``text``/``a``/``at``/``img``
tags), ``image`` (``image_key``) and ``file`` (``file_key``, ``file_name``).  Files are only *named* here
(a :class:`MediaRef` of message id, type and key); the pipeline fetches them after the ack.  A group
message is addressed when one of its mentions is the bot; the referrer carries the message id (to reply
to it) and, in groups, the asker's open_id (to mention them in the answer).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

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
    Link,
    Media,
    MediaRef,
    Mention,
    MessageId,
    Quote,
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("feishu")
RECEIVE = "im.message.receive_v1"


class Skipped(Exception):
    """An event the gateway reads but does not answer (another event type, a message type it cannot show)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class UserIds(_Model):
    open_id: str = ""


class MentionSeen(_Model):
    key: str
    id: UserIds = UserIds()
    name: str = ""


class MessageSeen(_Model):
    message_id: str
    chat_id: str
    chat_type: Literal["p2p", "group"] | str = "p2p"
    thread_id: str = ""
    parent_id: str = ""
    message_type: str
    content: str = "{}"
    mentions: list[MentionSeen] = []


class SenderSeen(_Model):
    sender_id: UserIds = UserIds()
    sender_type: str = "user"


class EventBody(_Model):
    sender: SenderSeen
    message: MessageSeen


class Header(_Model):
    event_id: str
    event_type: str
    token: str = ""


class Envelope(_Model):
    """A schema 2.0 event: its header and its body (left unread for other event types)."""

    header: Header
    event: dict[str, Any] = {}

    @classmethod
    def of(cls, raw: Any) -> Envelope:
        if not isinstance(raw, dict) or raw.get("schema") != "2.0":
            raise InvalidEvent("feishu event is not a schema 2.0 event")
        try:
            return cls.model_validate(raw)
        except ValidationError as error:
            raise InvalidEvent(f"feishu event header: {error.errors()[0]['msg']}") from None


class Parts:
    """Elements of one message, mentions resolved against the bot's open_id."""

    def __init__(self, message: MessageSeen, bot: str) -> None:
        self.message, self.bot, self.out = message, bot, list[Element]()
        self.mentions = {m.key: m for m in message.mentions}

    def text(self, text: str) -> None:
        rest = text
        while rest:
            key = min((k for k in self.mentions if k in rest), key=rest.index, default=None)
            if key is None:
                break
            at = rest.index(key)
            self.out += [Text(text=rest[:at])] if at else []
            self.mention(key)
            rest = rest[at + len(key):]
        if rest:
            self.out.append(Text(text=rest))

    def mention(self, key: str) -> None:
        seen = self.mentions.get(key)
        if seen is not None:
            user = seen.id.open_id or key
            self.out.append(Mention(user=UserId(user), display_name=seen.name, is_self=bool(self.bot) and user == self.bot))

    def media(self, kind: Literal["image", "file"], key: Any, name: str = "") -> None:
        if not isinstance(key, str) or not key:
            raise InvalidEvent(f"feishu {kind} without a key")
        self.out.append(Media.inbound(kind, MediaRef(locator=f"{self.message.message_id}/{kind}/{key}", name=name)))

    def post(self, content: dict[str, Any]) -> None:
        body = content if "content" in content else next((v for v in content.values() if isinstance(v, dict)), {})
        title = body.get("title")
        if isinstance(title, str) and title:
            self.out.append(Text(text=title + "\n"))
        for n, paragraph in enumerate(body.get("content") or []):
            if n:
                self.out.append(Text(text="\n"))
            for tag in paragraph if isinstance(paragraph, list) else []:
                self.tag(tag if isinstance(tag, dict) else {})

    def tag(self, tag: dict[str, Any]) -> None:
        kind = tag.get("tag")
        if kind in ("text", "md") and isinstance(tag.get("text"), str):
            self.text(tag["text"])
        elif kind == "a" and isinstance(tag.get("href"), str):
            self.out.append(Link(url=tag["href"], text=str(tag.get("text") or "")))
        elif kind == "at":
            self.mention(str(tag.get("user_id") or ""))
        elif kind == "img":
            self.media("image", tag.get("image_key"))


def content_of(message: MessageSeen) -> dict[str, Any]:
    try:
        content = json.loads(message.content or "{}")
    except ValueError:
        raise InvalidEvent("feishu message content is not JSON") from None
    if not isinstance(content, dict):
        raise InvalidEvent("feishu message content is not an object")
    return content


def elements_of(message: MessageSeen, bot: str) -> tuple[Element, ...]:
    parts, content = Parts(message, bot), content_of(message)
    if message.parent_id:
        parts.out.append(Quote(message=MessageId(message.parent_id)))
    kind = message.message_type
    if kind == "text" and isinstance(content.get("text"), str):
        parts.text(content["text"])
    elif kind == "post":
        parts.post(content)
    elif kind == "image":
        parts.media("image", content.get("image_key"))
    elif kind == "file":
        parts.media("file", content.get("file_key"), str(content.get("file_name") or ""))
    else:
        raise Skipped(f"message type {kind[:20]} is not read")
    return tuple(parts.out)


def decode(raw: Any, *, account: AccountId, bot: str = "", now: datetime | None = None) -> InboundMessage:
    """One event as a message: ``InvalidEvent`` for one that is not an event, ``Skipped`` for one not read.

    ``bot`` is the app's own open_id (from ``bot/v3/info``): mentions of it address the bot."""
    envelope = Envelope.of(raw)
    if envelope.header.event_type != RECEIVE:
        raise Skipped(f"event {envelope.header.event_type[:40]} is not read")
    try:
        body = EventBody.model_validate(envelope.event)
    except ValidationError as error:
        raise InvalidEvent(f"feishu message event: {error.errors()[0]['msg']}") from None
    message, sender = body.message, body.sender
    group = message.chat_type == "group"
    elements = elements_of(message, bot)
    user = sender.sender_id.open_id
    if not user:
        raise InvalidEvent("feishu message without the sender's open_id")
    conversation = Conversation(chat=ChatId(message.chat_id), kind=ConversationKind.GROUP if group else ConversationKind.DIRECT,
                                thread=message.thread_id or None)
    return InboundMessage(
        event_id=EventId(envelope.header.event_id),
        address=Address(channel=CHANNEL, account=account, conversation=conversation),
        sender=Sender(user=UserId(user), is_bot=sender.sender_type != "user"),
        elements=elements,
        referrer=Referrer(message=MessageId(message.message_id), token=user if group else None),
        received_at=now or datetime.now(UTC),
        addressed=not group or any(isinstance(e, Mention) and e.is_self for e in elements),
        from_self=bool(bot) and user == bot,
    )
