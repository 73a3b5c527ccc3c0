"""Slack event -> InboundMessage.

The event id is ``{channel}:{ts}``, the message's own identity, not Slack's
``event_id``: one message said in a channel with a mention arrives twice, as
``message`` and as ``app_mention`` with different event ids, and a retried
delivery (``X-Slack-Retry-Num``, or a Socket Mode redelivery) repeats either.
Keyed by the message, every copy lands on the gateway's one dedup key.

Where a conversation is: a direct message (``channel_type: im``) is the DM,
or the assistant thread it was said in (``thread_ts``).  In a channel every
thread is a conversation, and a top-level message opens one under itself
(``thread = ts``), so the answer to a top-level mention lands in a new thread
and the follow-ups there continue it.

mrkdwn is read as Slack writes it: ``<@U123>`` mentions (one naming the bot
addresses it), ``<https://url|label>`` links, ``<#C1|name>`` channels, and
``&amp; &lt; &gt;`` escapes.  Files arrive as :class:`Media` holding
``url_private`` for a fetch after the ack, never downloaded here.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, StrictStr, ValidationError

from channels._kit.media import safe_name
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
    Referrer,
    Sender,
    Text,
    UserId,
)

CHANNEL = ChannelName("slack")
READ_SUBTYPES = frozenset({None, "file_share", "thread_broadcast", "bot_message"})
"""Message subtypes that are something said; edits, joins, deletions and the rest are not."""
TOKEN = re.compile(r"<([^<>|]+)(?:\|([^<>]*))?>")


@dataclass(frozen=True)
class Me:
    """Who the bot is in its workspace (auth.test)."""

    user: str
    bot: str
    team: str


class Skipped(Exception):
    """An event that is nothing to answer (an edit, a join): acknowledged, recorded as refused."""


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow")


class _File(_Shape):
    name: StrictStr = ""
    mimetype: StrictStr = ""
    size: int | None = None
    url_private: StrictStr | None = None
    url_private_download: StrictStr | None = None


class _Event(_Shape):
    type: StrictStr
    channel: StrictStr
    ts: StrictStr
    user: StrictStr | None = None
    bot_id: StrictStr | None = None
    text: StrictStr = ""
    subtype: StrictStr | None = None
    channel_type: StrictStr | None = None
    thread_ts: StrictStr | None = None
    team: StrictStr | None = None
    files: list[_File] = []


def _elements(text: str, me: Me) -> tuple[list[Element], bool]:
    elements: list[Element] = []
    addressed, position = False, 0
    for match in TOKEN.finditer(text):
        if match.start() > position:
            elements.append(Text(text=html.unescape(text[position:match.start()])))
        target, label = match.group(1), html.unescape(match.group(2) or "")
        if target.startswith("@"):
            is_self = target[1:] == me.user
            addressed = addressed or is_self
            elements.append(Mention(user=UserId(target[1:]), display_name=label or target[1:], is_self=is_self))
        elif target.startswith("#"):
            elements.append(Text(text=f"#{label or target[1:]}"))
        elif target.startswith("!"):
            elements.append(Text(text=f"@{label or target[1:].split('^')[0]}"))
        else:
            elements.append(Link(url=html.unescape(target), text=label))
        position = match.end()
    if position < len(text):
        elements.append(Text(text=html.unescape(text[position:])))
    return elements, addressed


def _media(files: list[_File]) -> list[Media]:
    return [Media.inbound("image" if f.mimetype.startswith("image/") else "file", MediaRef(
        locator=f.url_private_download or f.url_private or "", name=safe_name(f.name) if f.name else "",
        mime_type=f.mimetype, size=f.size)) for f in files if f.url_private_download or f.url_private]


def decode(raw: dict, *, account: AccountId, me: Me) -> InboundMessage:
    """Decode one ``message`` or ``app_mention`` event; raise Skipped or InvalidEvent with the reason."""
    try:
        event = _Event.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the event"
        raise InvalidEvent(f"slack {raw.get('type')} event is malformed: {where}: {first['msg']}") from None
    if event.subtype not in READ_SUBTYPES:
        raise Skipped(f"message subtype {event.subtype}")
    direct = event.channel_type == "im" or (event.type == "message" and event.channel.startswith("D"))
    kind = ConversationKind.DIRECT if direct else ConversationKind.GROUP
    thread = event.thread_ts if direct else (event.thread_ts or event.ts)
    from_self = event.user == me.user or (event.bot_id is not None and event.bot_id == me.bot)
    if event.user is None and event.bot_id is None:
        raise InvalidEvent(f"slack message {event.channel}:{event.ts} has no sender")
    elements, addressed = _elements(event.text, me)
    media = _media(event.files)
    if not elements and not media:
        raise InvalidEvent(f"slack message {event.channel}:{event.ts} has nothing to read (no text, no files)")
    try:
        received = datetime.fromtimestamp(float(event.ts), UTC)
    except ValueError:
        raise InvalidEvent(f"slack message ts {event.ts!r} is not a timestamp") from None
    sender = UserId(event.user or event.bot_id or "")
    return InboundMessage(
        event_id=EventId(f"{event.channel}:{event.ts}"),
        address=Address(channel=CHANNEL, account=account,
                        conversation=Conversation(chat=ChatId(event.channel), kind=kind, thread=thread)),
        sender=Sender(user=sender, is_bot=event.bot_id is not None),
        elements=(*media, *elements),
        referrer=Referrer(message=MessageId(event.ts), token=f"{event.team or me.team}:{event.user or ''}"),
        received_at=received,
        addressed=direct or addressed or event.type == "app_mention",
        from_self=from_self,
    )
