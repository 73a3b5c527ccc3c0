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
channel.  Types the gateway does not read yet (image, voice, file, mixed) are
refused with a reason rather than answered as empty text.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError

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


class Callback(BaseModel):
    """The fields of a message callback the gateway reads; the rest is ignored."""

    model_config = ConfigDict(extra="ignore")
    msgid: StrictStr
    chattype: Literal["single", "group"] = "single"
    chatid: StrictStr | None = None
    sender: _From
    msgtype: StrictStr
    text: _Text | None = None

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


def decode(frame: Any, *, account: AccountId, now: datetime | None = None) -> InboundMessage:
    """One callback frame as a message; ``InvalidEvent`` for a frame that is not one, ``Skipped`` for a type not read."""
    if not isinstance(frame, dict):
        raise InvalidEvent("wecom frame is not an object")
    headers = frame.get("headers")
    req_id = headers.get("req_id") if isinstance(headers, dict) else None
    if not isinstance(req_id, str) or not req_id:
        raise InvalidEvent("wecom callback without a req_id")
    body = Callback.of(frame.get("body"))
    if body.msgtype != "text" or body.text is None:
        raise Skipped(f"message type {body.msgtype[:20]} is not read")
    group = body.chattype == "group"
    if group and not body.chatid:
        raise InvalidEvent("wecom group callback without a chatid")
    chat = ChatId(body.chatid if group and body.chatid else body.sender.userid)
    kind = ConversationKind.GROUP if group else ConversationKind.DIRECT
    return InboundMessage(
        event_id=EventId(body.msgid),
        address=Address(channel=CHANNEL, account=account, conversation=Conversation(chat=chat, kind=kind)),
        sender=Sender(user=UserId(body.sender.userid)),
        elements=elements_of(body.text.content, group),
        referrer=Referrer(message=MessageId(body.msgid), token=req_id),
        received_at=now or datetime.now(UTC),
        addressed=True,  # a DM is addressed; a group hands the AI bot only its @-messages
    )
