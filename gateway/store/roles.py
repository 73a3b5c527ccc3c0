"""The store by role: each part of the gateway asks for the one it uses.

Why split: :class:`gateway.store.Store` is every role at once -- what an engine implements
(SQLite, PostgreSQL) and what the composition root holds.  A module that only accepts inbound
messages, or only keeps the outbox, says so by asking for :class:`InboxStore` or
:class:`OutboxStore`; a module using two roles declares a protocol of its own that combines them,
next to itself.  The roles live here together because their consumers are spread over the
pipeline, the desks and the collectors; the store contract suite (``tests/store/test_contract_*``)
holds every engine to each role, one file per role.

Every write that reads what it changes is atomic on its own (one statement, or one transaction
that locks what it reads): an engine may run many at once (PostgreSQL does), so none may rely on
a single writer for its read-modify-write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from gateway.core.messages import Address, InboundMessage, MessageId, OutboundReply
from gateway.store import (
    InboundState,
    InboxItem,
    OutboxItem,
    PairingRequest,
    QueueDepths,
    Reminder,
    ReplyState,
    Takeover,
)
from gateway.store.health import StoreHealth


class InboxStore(Protocol):
    """Inbound messages: dedup and inbox are one write; their state moves; the files they refer to."""

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

    async def blobs_in_use(self, received_before: float) -> set[str]:
        """The blob keys stored messages may still need: those of every message still pending or held,
        and of every message received at ``received_before`` or later, whatever its state."""
        ...

    async def erase_sender_files(self, channel: str, account: str, user: str, note: str) -> set[str]:
        """Take the files out of every stored message of this sender (each becomes a ``missing`` file,
        ``note`` saying why, so nothing fetches it again) and return the blob keys they referred to."""
        ...

    async def last_inbound_at(self, conversation_key: str) -> float | None:
        """When the platform last handed us a message in this conversation (reply windows start there)."""
        ...


class OutboxStore(Protocol):
    """The transactional outbox: replies keyed by their idempotency key, and their progress."""

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
        """Remember that parts up to ``parts_sent`` are out (and, with ``delivered``, that the reply is done).
        ``message`` joins the reply's sent ids; a reply that does not exist is a ``KeyError``."""
        ...

    async def record_attempt(self, key: str, error: str) -> int:
        """Count a failed send of the reply and keep its error; return the attempts so far (0: no such reply)."""
        ...

    async def parts_answering(self, conversation: str, message: MessageId, *, besides: str) -> int:
        """How many parts the replies in ``conversation`` other than ``besides`` have sent in answer to the
        platform message ``message`` (a greeting, the answer, a notice): what a platform's budget of
        replies per inbound message has left (QQ 5, personal WeChat 10)."""
        ...

    async def finish_reply(self, key: str, state: ReplyState, error: str | None = None) -> None: ...

    async def open_replies(self) -> list[OutboxItem]:
        """Replies still streaming or ready, oldest first (restart recovery)."""
        ...


class CursorTable(Protocol):
    """Every channel account's cursors, by ``(channel, account, name)``.

    A channel sees only its own account's, through :class:`gateway.core.channel.CursorStore`
    (``gateway.app.AccountCursors`` is that view over this table)."""

    async def get_cursor(self, channel: str, account: str, name: str) -> str | None: ...

    async def put_cursor(self, channel: str, account: str, name: str, value: str, *, keep_s: float | None = None) -> None:
        """Write the cursor; with ``keep_s`` prune forgets it that long after this write, without it is kept for good."""
        ...


class AccessStore(Protocol):
    """Who may talk: approved senders, pairing codes, held messages, and how often a refusal is told."""

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

    async def drop_expired_holds(self, older_than_s: float) -> int:
        """Drop held messages received more than ``older_than_s`` ago; return how many."""
        ...

    async def pairing_list(self) -> list[PairingRequest]: ...

    async def pairing_resolve(self, code: str, approve: bool) -> PairingRequest | None:
        """Take a live code (once: a second resolve finds nothing); approve its sender or drop their held messages."""
        ...

    async def notice_due(self, channel: str, account: str, user: str, min_interval_s: float) -> bool:
        """True (and remember now) if a refusal notice may be sent to this sender."""
        ...


class ReminderStore(Protocol):
    """Proactive messages the brain scheduled."""

    async def add_reminder(self, reminder: Reminder) -> None: ...

    async def fire_due_reminders(self, now: float, key_of: Callable[[str], str]) -> list[OutboxItem]:
        """Turn every due reminder into a READY outbox reply, in the same transaction as marking it fired."""
        ...


class TakeoverStore(Protocol):
    """Conversations the teacher has taken over."""

    async def start_takeover(self, partner: str, target: Address, reason: str, locale: str = "") -> Takeover:
        """Pause the partner in ``target``'s conversation (idempotent: returns the running takeover).

        ``locale`` is the learner's (``Sender.locale``), kept for what is said to them when it ends."""
        ...

    async def takeover_of(self, conversation_key: str) -> Takeover | None: ...
    async def takeover_by_code(self, code: str) -> Takeover | None: ...
    async def end_takeover(self, code: str) -> Takeover | None: ...
    async def takeovers(self) -> list[Takeover]: ...


class StoreUpkeep(Protocol):
    """The store as a whole: opening and closing it, whether writes work, its queues, its pruning."""

    health: StoreHealth
    """Whether writes work (:mod:`gateway.store.health`)."""

    async def open(self) -> None: ...
    async def close(self) -> None: ...

    async def probe_write(self) -> None:
        """Commit a small write that needs new room; raises while writes fail."""
        ...

    async def queue_depths(self) -> QueueDepths: ...

    async def prune(self) -> int:
        """Forget dedup keys past their retention, finished replies and expired cursors; return rows removed."""
        ...
