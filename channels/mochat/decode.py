"""Mochat's events -> :class:`InboundMessage`: session batches and panel messages.

Two shapes reach the agent, by socket push or by the REST fallback:

- **a session batch** (``claw.session.events`` pushed, the ``subscribeSessions`` ack, and
  ``POST /api/claw/sessions/watch``)::

      {"sessionId": "...", "cursor": 12,
       "events": [{"seq": 12, "type": "message.add",
                   "payload": {"messageId": "...", "author": "<user id>", "content": "hi",
                               "authorInfo": {"nickname": "..."}}}]}

  ``seq`` orders a session; the batch's ``cursor`` is the last ``seq`` it covers.
- **a panel message** (``notify:chat.message.add`` pushed, and each item of
  ``POST /api/claw/groups/panels/messages``)::

      {"_id": "...", "groupId": "...", "converseId": "<panel id>", "author": "...",
       "content": "hi", "meta": {"mentions": ["<user id>"]}}

  Mochat's own documentation does not say how a mention is carried; the gateway
  reads ``meta.mentions`` (user ids) and an ``@<agent id>`` in the text, and the
  emulator speaks that (ADR 0046).

The dedup key is the platform's message id (``messageId`` / ``_id``) in both, so a
message that comes once by the socket and once by the poll is one message to the
inbox.  The agent's own messages are left out; a malformed event is reported as
invalid and its position still counts, so one bad event cannot block a session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictInt, StrictStr, ValidationError

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

CHANNEL = ChannelName("mochat")
MESSAGE_ADD = "message.add"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Author(_Model):
    nickname: StrictStr | None = None


class _Payload(_Model):
    messageId: StrictStr
    author: StrictStr
    content: Any = None
    authorInfo: _Author | None = None


class _Event(_Model):
    seq: StrictInt
    type: StrictStr
    payload: Any = None


class _SessionBatch(_Model):
    sessionId: StrictStr
    cursor: StrictInt | None = None
    events: list[Any] = []


class _Meta(_Model):
    mentions: list[StrictStr] = []


class _PanelMessage(_Model):
    id: StrictStr
    converseId: StrictStr
    groupId: StrictStr | None = None
    author: StrictStr
    content: Any = None
    meta: _Meta = _Meta()


@dataclass
class Batch:
    """What one push or poll hands the gateway: its messages, the position after it, and what was left out."""

    messages: list[InboundMessage] = field(default_factory=list)
    cursor: str | None = None
    invalid: list[str] = field(default_factory=list)
    own: int = 0


def _first_error(error: ValidationError) -> str:
    found = error.errors()[0]
    return f"{'.'.join(map(str, found['loc'])) or 'body'}: {found['msg']}"


def _message(*, account: AccountId, chat: str, kind: ConversationKind, message_id: str, author: str,
             elements: tuple[Element, ...], addressed: bool, token: str | None, name: str | None) -> InboundMessage:
    return InboundMessage(
        event_id=EventId(message_id),
        address=Address(channel=CHANNEL, account=account, conversation=Conversation(chat=ChatId(chat), kind=kind)),
        sender=Sender(user=UserId(author), display_name=name or ""),
        elements=elements,
        referrer=Referrer(message=MessageId(message_id), token=token),
        received_at=datetime.now(UTC),
        addressed=addressed,
    )


def session_batch(raw: Any, *, account: AccountId, agent: str, after: int) -> Batch:
    """A session batch; the cursor moves past ``after`` only.  Events at or before ``after`` (a redelivery)
    are still handed on, so the store's dedup recognises and counts them rather than a silent skip here.
    ``InvalidEvent`` when the envelope itself is not a batch."""
    try:
        batch = _SessionBatch.model_validate(raw)
    except ValidationError as error:
        raise InvalidEvent(f"mochat session batch: {_first_error(error)}") from None
    out, last = Batch(), after
    for item in batch.events:
        try:
            event = _Event.model_validate(item)
        except ValidationError as error:
            out.invalid.append(f"mochat session {batch.sessionId[:40]} event: {_first_error(error)}")
            continue
        last = max(last, event.seq)
        if event.type != MESSAGE_ADD:
            continue
        try:
            payload = _Payload.model_validate(event.payload)
        except ValidationError as error:
            out.invalid.append(f"mochat session {batch.sessionId[:40]} seq {event.seq}: {_first_error(error)}")
            continue
        if payload.author == agent:
            out.own += 1
            continue
        if not isinstance(payload.content, str):
            out.invalid.append(f"mochat message {payload.messageId[:40]}: content is not text")
            continue
        name = payload.authorInfo.nickname if payload.authorInfo else None
        out.messages.append(_message(account=account, chat=batch.sessionId, kind=ConversationKind.DIRECT,
                                     message_id=payload.messageId, author=payload.author,
                                     elements=(Text(text=payload.content),), addressed=True, token=None, name=name))
    if batch.cursor is not None:
        last = max(last, batch.cursor)  # the batch covers up to its cursor, events the agent does not see included
    out.cursor = str(last) if last > after else None
    return out


def panel_elements(content: str, mentioned: bool, agent: str) -> tuple[Element, ...]:
    """The text, with ``@<agent id>`` taken out as a mention of the agent."""
    tag = f"@{agent}"
    if tag in content:
        rest = " ".join(content.replace(tag, " ").split())
        return (Mention(user=UserId(agent), is_self=True), Text(text=rest)) if rest else (Mention(user=UserId(agent), is_self=True),)
    if mentioned:
        return (Mention(user=UserId(agent), is_self=True), Text(text=content))
    return (Text(text=content),)


def panel_message(raw: Any, *, account: AccountId, agent: str) -> InboundMessage | None:
    """One panel message; None for the agent's own.  ``InvalidEvent`` for one that is not a message."""
    if isinstance(raw, dict) and "_id" in raw:
        raw = {**raw, "id": raw["_id"]}
    try:
        message = _PanelMessage.model_validate(raw)
    except ValidationError as error:
        raise InvalidEvent(f"mochat panel message: {_first_error(error)}") from None
    if message.author == agent:
        return None
    if not isinstance(message.content, str):
        raise InvalidEvent(f"mochat panel message {message.id[:40]}: content is not text")
    mentioned = agent in message.meta.mentions or f"@{agent}" in message.content
    return _message(account=account, chat=message.converseId, kind=ConversationKind.GROUP, message_id=message.id,
                    author=message.author, elements=panel_elements(message.content, mentioned, agent),
                    addressed=mentioned, token=message.groupId, name=None)
