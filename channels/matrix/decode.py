"""Matrix room event (the raw JSON a /sync hands out) -> InboundMessage.

The event id is the Matrix ``event_id``: globally unique and stable, so a
re-synced event hits the gateway's dedup.  A room is one conversation; a
threaded message (``m.relates_to`` ``rel_type: m.thread``) is its own
conversation, keyed by the thread root, so the answer stays in the thread.

The bot is addressed in a group when ``m.mentions.user_ids`` names it, when
the body names its MXID or display name (older clients send no
``m.mentions``), or when the message is a real reply to one of its messages.
A thread's reply *fallback* (``is_falling_back``) is not a reply: mention
rules stay in force inside threads.

Events that are not messages (state, reactions, redactions, receipts) are not
the learner speaking and return ``None``.  Encrypted events and malformed
content raise :class:`InvalidEvent` with the reason, so the sink records the
drop instead of losing it silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

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

CHANNEL = ChannelName("matrix")
MEDIA_TYPES: dict[str, MediaKind] = {"m.image": "image", "m.audio": "audio", "m.video": "video", "m.file": "file"}
TEXT_TYPES = {"m.text", "m.notice", "m.emote"}


class Skipped(Exception):
    """A message event that is deliberately not answered (an edit of an earlier message); carries the reason."""


class Unreadable(Exception):
    """A message the bot was sent but cannot read by design (end-to-end encryption).

    Recorded with ``sink.refused``: ``rule`` labels the drop metric, ``detail`` tells the operator what to do.
    """

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(detail)
        self.rule, self.detail = rule, detail


@dataclass(frozen=True)
class RoomView:
    """What decode needs to know about the room and the bot, looked up by the channel."""

    room_id: str
    kind: ConversationKind
    me: str
    my_names: tuple[str, ...] = ()
    title: str | None = None


def relation(content: dict[str, Any]) -> dict[str, Any]:
    relates = content.get("m.relates_to")
    return relates if isinstance(relates, dict) else {}


def reply_target(content: dict[str, Any]) -> str | None:
    """The event a message really replies to (a thread's fallback reply does not count)."""
    relates = relation(content)
    if relates.get("is_falling_back"):
        return None
    reply = relates.get("m.in_reply_to")
    target = reply.get("event_id") if isinstance(reply, dict) else None
    return target if isinstance(target, str) else None


def object_at(content: dict[str, Any], key: str) -> dict[str, Any]:
    """``content[key]`` when it is a JSON object, else an empty one: event JSON is what any client sent."""
    value = content.get(key)
    return value if isinstance(value, dict) else {}


def media_ref(event: dict[str, Any]) -> tuple[str, str, int | None] | None:
    """(mxc url, msgtype, declared size) of a media message, else None."""
    content = event.get("content")
    if event.get("type") != "m.room.message" or not isinstance(content, dict):
        return None
    if content.get("msgtype") not in MEDIA_TYPES or not isinstance(content.get("url"), str):
        return None
    info = object_at(content, "info")
    size = info.get("size") if isinstance(info.get("size"), int) else None
    return content["url"], content["msgtype"], size


def _strip_reply_fallback(body: str) -> str:
    """Drop the ``> <@user> quoted`` lines older clients put before a reply's own text."""
    if not body.startswith("> "):
        return body
    lines = body.split("\n")
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    if index < len(lines) and lines[index] == "":
        index += 1
    return "\n".join(lines[index:])


def _text_with_mentions(body: str, view: RoomView, mentioned: bool, *, intentional: bool) -> list[Element]:
    """Split the body at the first naming of the bot; a mention only in ``m.mentions`` leads the text.

    A client that sends ``m.mentions`` (``intentional``) says exactly whom it mentions, so its body is
    not searched for the bot's name: "the tutor said" in a group is not a call to the tutor."""
    search = not intentional or mentioned
    names = [re.escape(view.me)] + [f"@?{re.escape(n)}" for n in view.my_names if n]  # the full MXID first
    pattern = "|".join(names)
    match = re.search(rf"(?<![\w@])(?:{pattern})(?!\w)", body, re.IGNORECASE) if search else None
    me = Mention(user=UserId(view.me), display_name=view.my_names[0] if view.my_names else view.me, is_self=True)
    if match is None:
        elements: list[Element] = [me] if mentioned else []
        return [*elements, Text(text=f" {body}" if elements else body)] if body else elements
    before, after = body[: match.start()], body[match.end() :]
    if not before.strip():
        after = re.sub(r"^[:,]?\s*", " ", after)  # "Tutor: what is ..." -- the separator is not what was said
    elements = [Text(text=before)] if before else []
    elements.append(me)
    if after.strip():
        elements.append(Text(text=after))
    return elements


def decode(
    event: dict[str, Any],
    view: RoomView,
    *,
    account: AccountId,
    sender_name: str = "",
    quoted: dict[str, Any] | None = None,
) -> InboundMessage | None:
    """Decode one timeline event; ``None`` for non-messages, :class:`InvalidEvent` for what cannot be read."""
    kind = event.get("type")
    if kind == "m.room.encrypted":
        raise Unreadable(
            "encrypted",
            f"encrypted event {event.get('event_id')} in {view.room_id}: end-to-end encryption is not supported; "
            "use an unencrypted room with the bot",
        )
    if kind != "m.room.message":
        return None
    try:
        event_id, sender, content = event["event_id"], event["sender"], event["content"]
        if not (isinstance(event_id, str) and isinstance(sender, str) and isinstance(content, dict)):
            raise TypeError("event_id, sender and content must be a string, a string and an object")
        received_at = datetime.fromtimestamp(int(event["origin_server_ts"]) / 1000, UTC)
        msgtype, body = content["msgtype"], content["body"]
        if not isinstance(msgtype, str) or not isinstance(body, str):
            raise TypeError(f"msgtype and body must be strings, got {type(msgtype).__name__} and {type(body).__name__}")
    except (KeyError, TypeError, ValueError, OverflowError) as error:
        raise InvalidEvent(f"matrix event without a readable {error!s}: {str(event)[:200]}") from None
    relates = relation(content)
    if relates.get("rel_type") == "m.replace":
        raise Skipped(f"edit {event_id} of {relates.get('event_id')} by {sender}: only new messages are answered")
    thread = relates.get("event_id") if relates.get("rel_type") == "m.thread" else None
    if thread is not None and not isinstance(thread, str):
        raise InvalidEvent(f"matrix event {event_id}: thread root is not an event id")
    mentions = content.get("m.mentions")
    user_ids = mentions.get("user_ids") if isinstance(mentions, dict) else None
    mentioned = isinstance(user_ids, list) and view.me in user_ids

    elements: list[Element] = []
    target = reply_target(content)
    if target is not None:
        body = _strip_reply_fallback(body)
        author = quoted.get("sender") if quoted else None
        quoted_content = quoted.get("content") if quoted else None
        text = quoted_content.get("body", "") if isinstance(quoted_content, dict) else ""
        elements.append(Quote(message=MessageId(target), text=text if isinstance(text, str) else "",
                              author=UserId(author) if isinstance(author, str) else None, is_self=author == view.me))
    if msgtype in MEDIA_TYPES:
        ref = media_ref(event)
        if ref is None:
            raise InvalidEvent(f"matrix {msgtype} event {event_id} has no mxc url to fetch the file from")
        info = object_at(content, "info")
        filename = given if isinstance(given := content.get("filename"), str) else body
        caption = body if filename != body else ""
        declared = MediaRef(locator=ref[0], size=ref[2], mime_type=str(info.get("mimetype") or ""),
                            name=safe_name(filename) if filename else "")
        elements.append(Media.inbound(MEDIA_TYPES[msgtype], declared, caption=caption))
        if mentioned:
            elements.append(Mention(user=UserId(view.me), display_name=view.my_names[0] if view.my_names else view.me,
                                    is_self=True))
    else:
        elements.extend(_text_with_mentions(body, view, mentioned, intentional=isinstance(mentions, dict)))

    addressed = view.kind is ConversationKind.DIRECT or any(
        isinstance(e, (Mention, Quote)) and e.is_self for e in elements
    )
    return InboundMessage(
        event_id=EventId(event_id),
        address=Address(channel=CHANNEL, account=account,
                        conversation=Conversation(chat=ChatId(view.room_id), kind=view.kind, thread=thread,
                                                  title=view.title)),
        sender=Sender(user=UserId(sender), display_name=sender_name, is_bot=msgtype == "m.notice"),
        elements=tuple(elements),
        referrer=Referrer(message=MessageId(event_id), token=sender),  # the token: whom the answer mentions
        received_at=received_at,
        addressed=addressed,
        from_self=sender == view.me,
    )
