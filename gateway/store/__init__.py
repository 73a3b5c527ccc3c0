"""Durable state behind one interface.

Everything that makes "nothing lost, nothing twice" hold across a crash lives
here: the inbound dedup keys and inbox, the outbox of replies with their
progress, channel cursors, pairing codes and approved senders -- and the teacher
console's users and sessions (:mod:`gateway.store.console`).  SQLite (WAL)
is the embedded default (``gateway.store.sqlite``); the SQL is kept portable
(``ON CONFLICT``, no SQLite-only functions) so PostgreSQL can back a
multi-node deployment behind the same :class:`Store` protocol, the union of the
roles in :mod:`gateway.store.roles` that each consumer asks for alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from gateway.core.messages import Address, InboundMessage, Media, MessageId, OutboundReply
from gateway.store.accounts import AccountStore
from gateway.store.activity import ActivityStore
from gateway.store.console import ConsoleStore
from gateway.store.tokens import ApiTokenStore


class InboundState(str, Enum):
    PENDING = "pending"  # durable, waiting for a turn
    HELD = "held"  # waiting for the owner to approve the sender (pairing)
    ANSWERED = "answered"  # a reply in the outbox covers it
    DROPPED = "dropped"  # policy or decoding refused it; ``reason`` says why


class ReplyState(str, Enum):
    STREAMING = "streaming"  # the turn is running; a preview may be on screen
    READY = "ready"  # final text known; parts still to send
    DELIVERED = "delivered"
    FAILED = "failed"  # dead letter: permanent error or attempts exhausted


@dataclass(frozen=True)
class InboxItem:
    seq: int
    message: InboundMessage
    state: InboundState


@dataclass(frozen=True)
class OutboxItem:
    reply: OutboundReply
    state: ReplyState
    preview: str | None
    """The channel's handle of the preview message or native stream on screen (``SentMessage.ref``)."""
    preview_unconfirmed: bool
    """A preview send was started but its platform id never came back (crash, lost response)."""
    parts_sent: int
    sent: tuple[MessageId, ...]
    attempts: int
    last_error: str | None


@dataclass(frozen=True)
class PairingRequest:
    channel: str
    account: str
    code: str
    user: str
    display_name: str
    created_at: float
    expires_at: float


@dataclass(frozen=True)
class Reminder:
    id: str
    target: Address
    text: str
    due_at: float


@dataclass(frozen=True)
class Takeover:
    """A conversation the teacher has taken over: the partner stays quiet there until handed back."""

    code: str
    partner: str
    target: Address
    reason: str
    started_at: float
    locale: str = ""
    """The learner's platform locale when it was handed over (the hand-back notice's language); empty: unknown."""


@dataclass(frozen=True)
class QueueDepths:
    inbound_pending: dict[str, int]
    """'channel:account' -> messages waiting for a turn."""
    inbound_held: dict[str, int]
    outbox_open: dict[str, int]
    """'channel:account' -> replies not yet delivered."""


def blob_keys(message: InboundMessage) -> set[str]:
    """The blob store keys of the files a message carries (fetched ones only)."""
    return {e.blob for e in message.elements if isinstance(e, Media) and e.blob is not None}


def without_files(message: InboundMessage, note: str) -> InboundMessage:
    """The message with every file it carries taken out: no blob, and ``note`` as the reason it is missing."""
    elements = tuple(e.model_copy(update={"blob": None, "missing": note}) if isinstance(e, Media) and (e.ref or e.blob)
                     else e for e in message.elements)
    return message.model_copy(update={"elements": elements})


# Below the states and rows they carry (they import them from here).
from gateway.store.roles import (  # noqa: E402
    AccessStore,
    CursorTable,
    InboxStore,
    OutboxStore,
    ReminderStore,
    StoreUpkeep,
    TakeoverStore,
)
from gateway.store.transcripts import TranscriptStore  # noqa: E402


class Store(InboxStore, OutboxStore, CursorTable, AccessStore, ReminderStore, TakeoverStore, StoreUpkeep,
            ConsoleStore, TranscriptStore, ActivityStore, AccountStore, ApiTokenStore, Protocol):
    """Every role at once: what an engine implements and the composition root holds.

    A consumer asks for the roles it uses (:mod:`gateway.store.roles`, or a protocol of its own that
    combines them), so a module's signature says what of the store it touches."""


__all__ = [
    "AccessStore", "CursorTable", "InboundState", "InboxItem", "InboxStore", "OutboxItem", "OutboxStore",
    "PairingRequest", "QueueDepths", "Reminder", "ReminderStore", "ReplyState", "Store", "StoreUpkeep",
    "Takeover", "TakeoverStore", "blob_keys", "without_files",
]
