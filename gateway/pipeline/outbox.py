"""The outbox: where every reply is written, and the one place its keys are made.

Every reply the gateway sends -- a turn's answer, a greeting, a pairing or
refusal notice, a teacher's relay, confirmation or report, a due reminder --
is an outbox row first (ADR 0001), under a deterministic key, so a crash
repeats nothing and loses nothing.  Writers hand the row to :class:`Outbox`;
it commits it (with the "answered" marks of what it covers, in the same
transaction) and wakes delivery.  Delivery is whoever listens
(:meth:`Outbox.on_ready`; the conversation lanes), so a writer -- the
dispatcher, the teacher desk, the reminder clock -- needs no lanes, and the
lanes need none of them.  Rows a previous run (or a failed store write) left
ready are woken through the same :meth:`Outbox.wake` by
:mod:`gateway.pipeline.resume`: there is one way delivery is woken.  Waking a
reply that delivery already has in hand is harmless: a listener takes each key
once, and says whether it took it.

The keys, all derived here:

- a reply: :func:`reply_key` of the conversation, the first inbound event it
  answers (or what it is about) and its purpose;
- each part a delivery sends, text or attachment: :func:`part_key`;
- the preview or native stream shown while the reply is written (the first
  part, shown early, ADR 0004): :func:`stream_key`;
- a reminder when it fires: :func:`reminder_key`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from gateway.core.messages import Address, OutboundReply
from gateway.store import OutboxItem, OutboxStore, ReminderStore, ReplyState


class OutboxWriteStore(OutboxStore, ReminderStore, Protocol):
    """What the outbox writes through: replies, and the reminders that fall due into it."""

log = logging.getLogger(__name__)

Wake = Callable[[str, Address], bool]
"""Told a reply key and its conversation once the row is durable and ready to deliver; True when it
took the reply on, False when it already had it in hand or cannot deliver there now (no running channel)."""


def reply_key(address: Address, first_event: str, purpose: str = "reply") -> str:
    """Deterministic reply key, so a resumed turn reuses the key it had before a crash."""
    raw = f"{address.conversation_key}\x00{first_event}\x00{purpose}"
    return hashlib.blake2b(raw.encode(), digest_size=12).hexdigest()


def part_key(key: str, index: int) -> str:
    """The idempotency key of one part of a reply (text or attachment), the same on every retry."""
    return f"{key}:{index}"


def stream_key(key: str) -> str:
    """The idempotency key of the preview (or native stream) that shows the reply's first part early."""
    return f"{key}:p"


def reminder_key(reminder_id: str) -> str:
    """The key of the reply a reminder becomes when it fires (once: the store marks it fired with it)."""
    return f"reminder-{reminder_id}"


class Outbox:
    """Writes replies durably and wakes delivery for them."""

    def __init__(self, store: OutboxWriteStore) -> None:
        self.store = store
        self._listeners: list[Wake] = []

    def on_ready(self, wake: Wake) -> None:
        """Be told of every reply that is ready to deliver (the lanes subscribe when they are built)."""
        self._listeners.append(wake)

    def wake(self, key: str, target: Address) -> bool:
        """Tell delivery a durable reply is ready (also for rows recovered from the store).

        True when a listener took it on: False when it already was in hand, or nothing delivers there now
        (the row stays in the store for the next start or the next resume)."""
        if not self._listeners:
            log.warning("reply ready but nothing delivers yet reply=%s; left in the store for later", key)
        taken = [listener(key, target) for listener in self._listeners]
        return any(taken)

    async def write(self, reply: OutboundReply, *, answered: Sequence[tuple[str, str, str]] = ()) -> OutboxItem:
        """Commit ``reply`` as ready and mark ``answered`` inbound messages answered, in one transaction.

        Does not wake delivery: for the caller that delivers the row itself (a lane, its own turn)."""
        return await self.store.put_reply(reply, ReplyState.READY, answered=answered)

    async def post(self, reply: OutboundReply, *, answered: Sequence[tuple[str, str, str]] = ()) -> None:
        """Commit ``reply`` (see :meth:`write`) and wake delivery for it."""
        await self.write(reply, answered=answered)
        self.wake(reply.idempotency_key, reply.target)

    async def fire_reminders(self, now: float) -> int:
        """Turn every due reminder into a reply (the store marks it fired in the same transaction), and wake delivery."""
        due = await self.store.fire_due_reminders(now, reminder_key)
        for item in due:
            self.wake(item.reply.idempotency_key, item.reply.target)
        return len(due)
