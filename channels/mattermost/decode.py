"""Mattermost's websocket frames and posts -> the kit session's :class:`Frame` and :class:`InboundMessage`.

The frames a bot reads (Mattermost's websocket API)::

    {"event": "hello", "data": {"connection_id": "...", "server_version": "..."}, "seq": 0}
    {"status": "OK", "seq_reply": 1}                                  # the authentication_challenge's answer
    {"status": "FAIL", "seq_reply": 1, "error": {"id": "...", "message": "..."}}
    {"event": "posted", "seq": 3, "broadcast": {"channel_id": "..."},
     "data": {"channel_type": "D", "channel_display_name": "...", "sender_name": "@ana",
              "mentions": "[\"<user id>\"]", "post": "<the post, as a JSON string>"}}

``post`` and ``mentions`` are JSON *strings* inside the JSON frame.  A post
(also what ``GET /channels/{id}/posts`` returns)::

    {"id", "create_at" (ms), "user_id", "channel_id", "root_id", "message", "type",
     "delete_at", "metadata": {"files": [{"id", "name", "mime_type", "size"}]}}

A post with a ``type`` is a system message (someone joined) and not answered; a
deleted one neither.  The dedup key is the post id, the same on the socket and
in a catch-up, so a post that arrives both ways is one message to the inbox.
Events' ``seq`` numbers count per connection only, so they are no position to
resume from: the position is the per-channel ``create_at`` kept in channel.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError

from channels._kit.websocket import Frame, FrameKind, Wire
from channels.mattermost.transport import PLATFORM, Me
from gateway.core.errors import AuthFailed, InvalidEvent
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

CHANNEL = ChannelName(PLATFORM)
AUTH_SEQ = 1
"""The ``seq`` of the authentication challenge; every other request on the socket counts on from it."""
DIRECT = "D"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _File(_Model):
    id: StrictStr
    name: str = ""
    mime_type: str = ""
    size: int | None = None


class _Metadata(_Model):
    files: list[_File] = []


class Post(_Model):
    id: StrictStr
    create_at: StrictInt
    user_id: StrictStr
    channel_id: StrictStr
    root_id: str = ""
    message: str = ""
    type: str = ""
    delete_at: int = 0
    metadata: _Metadata = _Metadata()


@dataclass(frozen=True)
class Where:
    """What the channel, not the post, says about where a post was made."""

    channel_type: str
    title: str = ""
    sender_name: str = ""
    mentions: tuple[str, ...] = ()


def _first_error(error: ValidationError) -> str:
    found = error.errors()[0]
    return f"{'.'.join(map(str, found['loc'])) or 'body'}: {found['msg']}"


def read_post(raw: Any) -> Post:
    try:
        return Post.model_validate(json.loads(raw) if isinstance(raw, str) else raw)
    except (ValueError, ValidationError) as error:
        why = _first_error(error) if isinstance(error, ValidationError) else "not JSON"
        raise InvalidEvent(f"mattermost post: {why}") from None


def elements(post: Post, me: Me, mentioned: bool) -> tuple[Element, ...]:
    """The text with ``@<bot username>`` taken out as a mention of the bot, then the post's files."""
    text = post.message
    tag = re.compile(rf"(?<![\w.-])@{re.escape(me.username)}(?![\w.-])", re.IGNORECASE) if me.username else None
    if tag is not None and tag.search(text):
        text, mentioned = " ".join(tag.sub(" ", text).split()), True
    found: list[Element] = [Mention(user=UserId(me.id), display_name=me.username, is_self=True)] if mentioned else []
    if text:
        found.append(Text(text=text))
    for file in post.metadata.files:
        kind: MediaKind = "image" if file.mime_type.startswith("image/") else "file"
        found.append(Media.inbound(kind, MediaRef(locator=file.id, size=file.size, mime_type=file.mime_type,
                                                  name=file.name)))
    return tuple(found)


def message_of(post: Post, where: Where, *, account: AccountId, me: Me, ours: Callable[[str], bool]) -> InboundMessage | None:
    """The post as a message; None for a system message or a deleted post (nothing anyone said)."""
    if post.type or post.delete_at:
        return None
    direct = where.channel_type == DIRECT
    mentioned = me.id in where.mentions
    found = elements(post, me, mentioned)
    addressed = direct or any(isinstance(e, Mention) and e.is_self for e in found) or bool(post.root_id and ours(post.root_id))
    kind = ConversationKind.DIRECT if direct else ConversationKind.GROUP
    return InboundMessage(
        event_id=EventId(post.id),
        address=Address(channel=CHANNEL, account=account, conversation=Conversation(
            chat=ChatId(post.channel_id), kind=kind, thread=post.root_id or None, title=where.title or None)),
        sender=Sender(user=UserId(post.user_id), display_name=where.sender_name.lstrip("@")),
        elements=found,
        referrer=Referrer(message=MessageId(post.id)),
        received_at=datetime.now(UTC),
        addressed=addressed,
        from_self=post.user_id == me.id,
    )


def _mentions(raw: Any) -> tuple[str, ...]:
    try:
        found = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return ()
    return tuple(str(m) for m in found) if isinstance(found, list) else ()


def parse(wire: Wire) -> dict[str, Any]:
    try:
        body = json.loads(wire)
    except ValueError:
        raise InvalidEvent("mattermost websocket frame: not JSON") from None
    if not isinstance(body, dict):
        raise InvalidEvent("mattermost websocket frame: not an object")
    return body


def frame_of(body: dict[str, Any], *, account: AccountId, me: Me, ours: Callable[[str], bool],
             seen: Callable[[Post], None]) -> Frame:
    """What one frame means to the session; ``seen`` is told each post handed on (its channel and time)."""
    if "seq_reply" in body:
        if body.get("seq_reply") != AUTH_SEQ:
            return Frame(FrameKind.IGNORED)  # a typing indicator's answer
        if body.get("status") != "OK":
            error = body.get("error")
            said = str(error.get("message") if isinstance(error, dict) else error)[:200]
            raise AuthFailed(PLATFORM, f"the websocket refused the token: {said}")
        return Frame(FrameKind.READY)
    event = body.get("event")
    if event == "hello":
        return Frame(FrameKind.HELLO)
    if event != "posted":
        return Frame(FrameKind.IGNORED)
    data = body.get("data")
    if not isinstance(data, dict):
        return Frame(FrameKind.EVENT, invalid="mattermost posted event: no data")
    try:
        post = read_post(data.get("post"))
    except InvalidEvent as error:
        return Frame(FrameKind.EVENT, invalid=str(error))
    where = Where(channel_type=str(data.get("channel_type") or ""), title=str(data.get("channel_display_name") or ""),
                  sender_name=str(data.get("sender_name") or ""), mentions=_mentions(data.get("mentions")))
    message = message_of(post, where, account=account, me=me, ours=ours)
    if message is None:
        return Frame(FrameKind.EVENT)
    seen(post)
    return Frame(FrameKind.EVENT, messages=(message,))
