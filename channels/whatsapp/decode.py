"""One webhook body from Meta -> the learners' messages and the status callbacks it holds.

Meta posts ``{"object": "whatsapp_business_account", "entry": [{"changes":
[{"field": "messages", "value": {...}}]}]}`` (WA4); a ``value`` names the
business number it is for (``metadata.phone_number_id``) and holds
``messages[]`` (what learners wrote, with ``contacts[]`` naming them) and/or
``statuses[]`` (what became of our sends: sent, delivered, read, failed).  A
body may batch several of each; a value for another number of the same
business account is not ours and is skipped.

A message's ``id`` (``wamid``) is its dedup key: Meta posts a body again while
it gets no 200, for up to seven days, so every copy lands on one key.  The
chat is the learner's ``wa_id`` (``from``), one-to-one only.  Text, a button
reply and an interactive reply carry words; an image, audio, video, document or
sticker carries a media id (:class:`~gateway.core.messages.MediaRef`, fetched
after the ack) and its caption.  Anything else (a reaction, a location, an
``unsupported`` message) is recorded as refused.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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

CHANNEL = ChannelName("whatsapp")
MEDIA: dict[str, MediaKind] = {"image": "image", "sticker": "image", "audio": "audio", "video": "video",
                               "document": "file"}


class _Open(BaseModel):
    model_config = ConfigDict(extra="ignore")


class File(_Open):
    id: str
    mime_type: str = ""
    caption: str = ""
    filename: str = ""


class Message(_Open):
    id: str = Field(min_length=1)
    sender: str = Field(alias="from", min_length=1)
    timestamp: str = ""
    type: str = "text"
    text: dict[str, str] | None = None
    button: dict[str, str] | None = None
    interactive: dict[str, dict[str, str] | str] | None = None
    image: File | None = None
    sticker: File | None = None
    audio: File | None = None
    video: File | None = None
    document: File | None = None


class Error(_Open):
    code: int = 0
    title: str = ""


class Status(_Open):
    id: str
    status: str
    recipient_id: str = ""
    timestamp: str = ""
    errors: list[Error] = []


class Profile(_Open):
    name: str = ""


class Contact(_Open):
    wa_id: str = ""
    profile: Profile = Profile()


class Metadata(_Open):
    phone_number_id: str = ""


class Value(_Open):
    """One change's content.  Its messages and statuses are read one by one (:func:`items`): one that is
    not what Meta documents is counted invalid without costing the others in the same body."""

    metadata: Metadata = Metadata()
    contacts: list[Contact] = []
    messages: list[Any] = []
    statuses: list[Any] = []


class Change(_Open):
    field: str = ""
    value: Value = Value()


class Entry(_Open):
    changes: list[Change] = []


class Body(_Open):
    object: str = ""
    entry: list[Entry] = []


ItemT = TypeVar("ItemT", Message, Status)


def items(kind: type[ItemT], raw: list[Any]) -> list[ItemT | InvalidEvent]:
    """Each of ``raw`` read as ``kind``, or the :class:`InvalidEvent` that says why it is not one."""
    read: list[ItemT | InvalidEvent] = []
    for item in raw:
        try:
            read.append(kind.model_validate(item))
        except ValidationError as error:
            read.append(InvalidEvent(f"whatsapp webhook: a {kind.__name__.lower()} Meta does not send "
                                     f"({error.error_count()} problems)"))
    return read


class Skipped(Exception):
    """A message that is nothing to answer: acknowledged, recorded as refused."""


def read_body(raw: bytes) -> Body:
    try:
        body = Body.model_validate_json(raw)
    except ValidationError as error:
        raise InvalidEvent(f"whatsapp webhook: not a Graph payload ({error.error_count()} problems)") from None
    if body.object != "whatsapp_business_account":
        raise InvalidEvent(f"whatsapp webhook: object {body.object[:40]!r} is not a WhatsApp business account")
    return body


def values(body: Body, phone_number_id: str) -> list[Value]:
    """The ``messages`` changes for this business number (another number's are not ours)."""
    return [change.value for entry in body.entry for change in entry.changes
            if change.field == "messages" and change.value.metadata.phone_number_id == phone_number_id]


def _received(stamp: str) -> datetime:
    """Meta writes epoch seconds as a string; a missing one is now."""
    if not stamp:
        return datetime.now(UTC)
    try:
        return datetime.fromtimestamp(int(stamp), UTC)
    except (ValueError, OverflowError):
        raise InvalidEvent(f"whatsapp message timestamp {stamp[:20]!r} is not a time") from None


def _elements(message: Message) -> tuple[Element, ...]:
    if message.type == "text" and message.text:
        words = message.text.get("body", "")
    elif message.type == "button" and message.button:
        words = message.button.get("text", "")
    elif message.type == "interactive" and message.interactive:
        picked = next((v for v in message.interactive.values() if isinstance(v, dict)), {})
        words = picked.get("title", "")
    elif message.type in MEDIA and (file := getattr(message, message.type)) is not None:
        media = Media(kind=MEDIA[message.type], name=file.filename,
                      ref=MediaRef(locator=file.id, mime_type=file.mime_type, name=file.filename))
        return (media, Text(text=file.caption)) if file.caption.strip() else (media,)
    else:
        raise Skipped(f"message {message.id[:40]} of type {message.type[:20]}")
    if not words.strip():
        raise Skipped(f"message {message.id[:40]} without text")
    return (Text(text=words),)


def decode(message: Message, contacts: list[Contact], *, account: AccountId) -> InboundMessage:
    """One learner's message; :class:`Skipped` or :class:`InvalidEvent` with the reason otherwise."""
    name = next((c.profile.name for c in contacts if c.wa_id == message.sender), "")
    return InboundMessage(
        event_id=EventId(message.id),
        address=Address(channel=CHANNEL, account=account,
                        conversation=Conversation(chat=ChatId(message.sender), kind=ConversationKind.DIRECT)),
        sender=Sender(user=UserId(message.sender), display_name=name),
        elements=_elements(message),
        referrer=Referrer(message=MessageId(message.id)),
        received_at=_received(message.timestamp),
        addressed=True,
    )
