"""OneBot v11 frames (as NapCat sends them) -> what they mean to the session, and messages.

Every frame is one JSON object.  Three shapes matter:

- ``post_type: meta_event`` -- ``lifecycle``/``connect`` once the socket is up
  (the session's READY), ``heartbeat`` every ``interval`` ms (a sign of life);
- ``post_type: message`` (and NapCat's ``message_sent``, the bot's own) --
  ``message_type`` ``private`` or ``group``, a numeric ``message_id``,
  ``user_id``, ``group_id`` in a group, and ``message`` in the *array* format:
  ``[{"type": "text", "data": {"text": ...}}, {"type": "at", "data": {"qq": ...}}, ...]``;
- no ``post_type`` but an ``echo`` -- the answer to an action the gateway sent.

The dedup key is ``self_id:message_id``: OneBot message ids are only unique
per logged-in account.  A group message is addressed when it @-mentions the
bot (``at`` with ``qq`` = ``self_id``) or replies to one of the bot's messages;
a ``reply`` segment becomes a :class:`~gateway.messages.Quote` of that message.
Only the array format is read: a string ``message`` (CQ codes) is refused with
the setting to change, because parsing CQ codes would guess at escapes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError

from channels._kit.websocket import Frame, FrameKind
from gateway.core.errors import InvalidEvent
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    Element,
    Emoji,
    EventId,
    InboundMessage,
    Media,
    MediaKind,
    MediaRef,
    Mention,
    MessageId,
    Quote,
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("napcat")
GROUP_PREFIX = "g"
"""Chat ids: a private chat is the friend's QQ number, a group ``g<group_id>`` (the two number spaces overlap)."""
MEDIA: dict[str, MediaKind] = {"image": "image", "record": "audio", "file": "file", "video": "video"}


class Answer(BaseModel):
    """An action's answer: ``{"status", "retcode", "data", "echo"}``."""

    model_config = ConfigDict(extra="ignore")
    status: StrictStr = "failed"
    retcode: StrictInt = -1
    data: Any = None
    echo: Any = None
    message: str = ""
    wording: str = ""


class Segment(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: StrictStr
    data: dict[str, Any] = {}


class _Sender(BaseModel):
    model_config = ConfigDict(extra="ignore")
    nickname: str = ""
    card: str = ""


class MessageEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    post_type: Literal["message", "message_sent"]
    message_type: Literal["private", "group"]
    self_id: StrictInt | StrictStr
    message_id: StrictInt | StrictStr
    user_id: StrictInt | StrictStr
    group_id: StrictInt | StrictStr | None = None
    message: list[Segment] | str
    sender: _Sender = _Sender()
    time: int | None = None


def chat_of(event: MessageEvent) -> ChatId:
    if event.message_type == "group":
        if event.group_id is None:
            raise InvalidEvent("onebot group message without a group_id")
        return ChatId(f"{GROUP_PREFIX}{event.group_id}")
    return ChatId(str(event.user_id))


def elements_of(segments: list[Segment], self_id: str, ours: Callable[[str], bool]) -> tuple[Element, ...]:
    """The array format as elements; segments the gateway does not read are passed over."""
    out: list[Element] = []
    for seg in segments:
        data = seg.data
        if seg.type == "text" and isinstance(data.get("text"), str):
            out.append(Text(text=data["text"]))
        elif seg.type == "at" and data.get("qq") is not None:
            qq = str(data["qq"])
            out.append(Mention(user=UserId(qq), display_name=str(data.get("name") or qq), is_self=qq == self_id))
        elif seg.type == "reply" and data.get("id") is not None:
            quoted = str(data["id"])
            out.insert(0, Quote(message=MessageId(quoted), is_self=ours(quoted)))
        elif seg.type == "face" and data.get("id") is not None:
            out.append(Emoji(name=f"qq:face:{data['id']}", fallback="", platform_ref=str(data["id"])))
        elif seg.type in MEDIA and (data.get("url") or data.get("file")):
            locator = str(data.get("url") or data.get("file"))
            out.append(Media.inbound(MEDIA[seg.type], MediaRef(locator=locator, name=str(data.get("file") or ""))))
    return tuple(out)


def message_of(event: MessageEvent, *, account: AccountId, ours: Callable[[str], bool],
               now: datetime | None = None) -> InboundMessage:
    if isinstance(event.message, str):
        raise InvalidEvent("onebot message in the string (CQ code) format: set NapCat's message format to array")
    self_id, chat = str(event.self_id), chat_of(event)
    elements = elements_of(event.message, self_id, ours)
    group = event.message_type == "group"
    addressed = not group or any(
        (isinstance(e, Mention) or isinstance(e, Quote)) and e.is_self for e in elements)
    from_self = event.post_type == "message_sent" or str(event.user_id) == self_id
    name = event.sender.card or event.sender.nickname
    return InboundMessage(
        event_id=EventId(f"{self_id}:{event.message_id}"),
        address=Address(channel=CHANNEL, account=account, conversation=Conversation(
            chat=chat, kind=ConversationKind.GROUP if group else ConversationKind.DIRECT)),
        sender=Sender(user=UserId(str(event.user_id)), display_name=name),
        elements=elements,
        referrer=Referrer(message=MessageId(str(event.message_id))),
        received_at=now or datetime.now(UTC),
        addressed=addressed,
        from_self=from_self,
    )


def parse(wire: str | bytes) -> dict[str, Any]:
    try:
        body = json.loads(wire)
    except (ValueError, UnicodeDecodeError):
        raise InvalidEvent("onebot frame is not JSON") from None
    if not isinstance(body, dict):
        raise InvalidEvent("onebot frame is not a JSON object")
    return body


def frame_of(body: dict[str, Any], *, account: AccountId, ours: Callable[[str], bool]) -> Frame:
    """What one OneBot frame means to the websocket session; ``InvalidEvent`` for one that cannot be read."""
    post = body.get("post_type")
    if post is None and "echo" in body:
        try:
            return Frame(FrameKind.ANSWER, answer=Answer.model_validate(body))
        except ValidationError as error:
            raise InvalidEvent(f"onebot action answer unreadable: {error.errors()[0]['msg']}") from None
    if post == "meta_event":
        if body.get("meta_event_type") == "lifecycle" and body.get("sub_type") == "connect":
            return Frame(FrameKind.READY, session_id=None)
        return Frame(FrameKind.IGNORED)
    if post in ("message", "message_sent"):
        try:
            event = MessageEvent.model_validate(body)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise InvalidEvent(f"onebot message event unreadable at {where}: {first['msg']}") from None
        return Frame(FrameKind.EVENT, messages=(message_of(event, account=account, ours=ours),))
    if isinstance(post, str):
        return Frame(FrameKind.IGNORED)  # notice / request events: not messages to answer
    raise InvalidEvent("onebot frame has neither post_type nor echo")
