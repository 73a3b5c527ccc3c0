"""Durable state behind one interface.

Everything that makes "nothing lost, nothing twice" hold across a crash lives
here: the inbound dedup keys and inbox, the outbox of replies with their
progress, channel cursors, pairing codes and approved senders -- and the teacher
console's users and sessions (:mod:`gateway.store.console`).  SQLite (WAL)
is the embedded default (``gateway.store.sqlite``); the SQL is kept portable
(``ON CONFLICT``, no SQLite-only functions) so PostgreSQL can back a
multi-node deployment later behind the same :class:`Store` protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from gateway.core.messages import Address, InboundMessage, Media, MessageId, OutboundReply
from gateway.store.accounts import AccountStore
from gateway.store.activity import ActivityStore
from gateway.store.console import ConsoleStore
from gateway.store.health import StoreHealth
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


# Below the states its rows carry (it imports them from here).
from gateway.store.transcripts import TranscriptStore  # noqa: E402


class Store(ConsoleStore, TranscriptStore, ActivityStore, AccountStore, ApiTokenStore, Protocol):
    health: StoreHealth
    """Whether writes work (:mod:`gateway.store.health`)."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def probe_write(self) -> None:
        """Commit a small write that needs new room; raises while writes fail."""
        ...

    # inbound: dedup and inbox are one write
    async def accept(self, messages: Sequence[InboundMessage], retention_s: float) -> list[bool]:
        """Persist new messages; return, per message, True if new and False if a duplicate."""
        ...

    async def open_inbound(self) -> list[InboxItem]:
        """Pending messages in arrival order (restart recovery)."""
        ...

    async def mark_inbound(self, keys: Sequence[tuple[str, str, str]], state: InboundState, reason: str = "") -> None: ...

    async def record_media(self, message: InboundMessage) -> None:
        """Keep what fetching the message's files found (blob keys, or why not) in its inbox row, so a
        restart reuses the fetch instead of repeating it; the event id, state and order stay as they were."""
        ...

    async def release_held(self, channel: str, account: str, user: str) -> list[InboxItem]:
        """Move a sender's held messages back to pending and return them."""
        ...

    # the files inbound messages refer to (gateway.blob_gc)
    async def blobs_in_use(self, received_before: float) -> set[str]:
        """The blob keys stored messages may still need: those of every message still pending or held,
        and of every message received at ``received_before`` or later, whatever its state."""
        ...

    async def erase_sender_files(self, channel: str, account: str, user: str, note: str) -> set[str]:
        """Take the files out of every stored message of this sender (each becomes a ``missing`` file,
        ``note`` saying why, so nothing fetches it again) and return the blob keys they referred to."""
        ...

    # outbox
    async def put_reply(
        self, reply: OutboundReply, state: ReplyState, answered: Sequence[tuple[str, str, str]] = ()
    ) -> OutboxItem:
        """Create or update a reply; in the same transaction mark ``answered`` inbound messages answered.
        Returns the row as written (with any preview and progress an earlier run recorded)."""
        ...

    async def get_reply(self, key: str) -> OutboxItem | None: ...
    async def begin_preview(self, reply: OutboundReply) -> None:
        """Write the streaming reply row and note that a preview send is about to start."""
        ...

    async def record_preview(self, key: str, handle: str) -> None:
        """Remember the handle of the preview (or stream) now on screen; clears ``preview_unconfirmed``."""
        ...
    async def record_part(self, key: str, parts_sent: int, message: MessageId | None, *, delivered: bool = False) -> None:
        """Remember that parts up to ``parts_sent`` are out (and, with ``delivered``, that the reply is done)."""
        ...
    async def record_attempt(self, key: str, error: str) -> int: ...
    async def parts_answering(self, conversation: str, message: MessageId, *, besides: str) -> int:
        """How many parts the replies in ``conversation`` other than ``besides`` have sent in answer to the
        platform message ``message`` (a greeting, the answer, a notice): what a platform's budget of
        replies per inbound message has left (QQ 5, personal WeChat 10)."""
        ...
    async def finish_reply(self, key: str, state: ReplyState, error: str | None = None) -> None: ...
    async def open_replies(self) -> list[OutboxItem]: ...

    # cursors
    async def get_cursor(self, channel: str, account: str, name: str) -> str | None: ...
    async def put_cursor(self, channel: str, account: str, name: str, value: str, *, keep_s: float | None = None) -> None: ...

    # access
    async def is_approved(self, channel: str, account: str, user: str) -> bool: ...
    async def pairing_request(
        self, channel: str, account: str, user: str, display_name: str, ttl_s: float, max_pending: int,
        *, source: str = "", max_account: int | None = None,
    ) -> PairingRequest | None:
        """The sender's live code (existing or new), or None when too many are pending.

        ``max_pending`` bounds the live codes of the sender's ``source`` (empty: of the whole account);
        ``max_account``, when given, bounds the account's codes over all sources."""
        ...

    async def release_approved(self) -> list[InboxItem]:
        """Move held messages of senders approved since (possibly by another process) back to pending."""
        ...

    async def drop_expired_holds(self, older_than_s: float) -> int: ...

    async def pairing_list(self) -> list[PairingRequest]: ...
    async def pairing_resolve(self, code: str, approve: bool) -> PairingRequest | None: ...
    async def notice_due(self, channel: str, account: str, user: str, min_interval_s: float) -> bool:
        """True (and remember now) if a refusal notice may be sent to this sender."""
        ...

    # reminders: proactive messages the brain scheduled
    async def add_reminder(self, reminder: Reminder) -> None: ...

    async def last_inbound_at(self, conversation_key: str) -> float | None:
        """When the platform last handed us a message in this conversation (reply windows start there)."""
        ...

    async def fire_due_reminders(self, now: float, key_of: Callable[[str], str]) -> list[OutboxItem]:
        """Turn every due reminder into a READY outbox reply, in the same transaction as marking it fired."""
        ...

    # teacher takeovers
    async def start_takeover(self, partner: str, target: Address, reason: str, locale: str = "") -> Takeover:
        """Pause the partner in ``target``'s conversation (idempotent: returns the running takeover).

        ``locale`` is the learner's (``Sender.locale``), kept for what is said to them when it ends."""
        ...

    async def takeover_of(self, conversation_key: str) -> Takeover | None: ...
    async def takeover_by_code(self, code: str) -> Takeover | None: ...
    async def end_takeover(self, code: str) -> Takeover | None: ...
    async def takeovers(self) -> list[Takeover]: ...

    async def queue_depths(self) -> QueueDepths: ...
    async def prune(self) -> int:
        """Forget dedup keys past their retention and finished replies; return rows removed."""
        ...
