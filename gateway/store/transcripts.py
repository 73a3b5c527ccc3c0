"""Conversations as the store already keeps them: what was heard (the inbox) and what was said (the outbox).

The teacher console lists a partner's conversations and shows each as a transcript.  Nothing new is
recorded for it: every message the platforms handed us is an inbox row and every reply -- a turn's
answer, a greeting, a notice, a teacher's answer, the hand-back notice -- an outbox row naming its
conversation, so the two tables *are* the transcript, for as long as they keep their rows (the
dedup retention, and a week for finished replies).  A reply that is still streaming is shown as its
row holds it: the first preview's text, then the final one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from gateway.core.messages import InboundMessage, OutboundReply
from gateway.store import InboundState, ReplyState

T = TypeVar("T")


@dataclass(frozen=True)
class Heard:
    """A message the platform handed us in a conversation."""

    message: InboundMessage
    state: InboundState
    at: float


@dataclass(frozen=True)
class Said:
    """A reply the gateway wrote into a conversation."""

    reply: OutboundReply
    state: ReplyState
    at: float


@dataclass(frozen=True)
class ConversationActivity:
    """One conversation's latest: its last message heard and last reply, and what still waits there."""

    key: str
    """``Address.conversation_key``: ``channel:account:chat[/thread]``."""
    last_heard: Heard
    last_said: Said | None
    pending: int
    """Messages heard there that no reply covers yet (a turn is coming or running)."""
    held: int
    """Messages held until the sender's pairing is approved."""


class TranscriptStore(Protocol):
    async def conversations(self, limit: int) -> list[ConversationActivity]:
        """The ``limit`` conversations heard from most recently, newest first."""
        ...

    async def transcript(self, conversation_key: str, limit: int) -> list[Heard | Said]:
        """The conversation's last ``limit`` messages heard and last ``limit`` replies, oldest first."""
        ...


class TranscriptRows:
    """:class:`TranscriptStore` over the SQLite tables (mixed into ``SqliteStore``, on its writer thread)."""

    async def _run(self, op: Callable[[sqlite3.Connection], T]) -> T:
        raise NotImplementedError  # SqliteStore's

    async def conversations(self, limit: int) -> list[ConversationActivity]:
        def op(conn: sqlite3.Connection) -> list[ConversationActivity]:
            heard = conn.execute(
                "SELECT i.conversation, i.payload, i.state, i.received_at FROM inbound i"
                " JOIN (SELECT conversation, MAX(seq) AS seq FROM inbound GROUP BY conversation) last ON i.seq = last.seq"
                " ORDER BY i.received_at DESC, i.seq DESC LIMIT ?", (limit,),
            ).fetchall()
            waiting: dict[tuple[str, str], int] = {
                (key, state): count for key, state, count in conn.execute(
                    "SELECT conversation, state, COUNT(*) FROM inbound WHERE state IN (?, ?) GROUP BY conversation, state",
                    (InboundState.PENDING.value, InboundState.HELD.value))
            }
            found = []
            for key, payload, state, at in heard:
                said = conn.execute(
                    "SELECT payload, state, created_at FROM outbox WHERE conversation = ? ORDER BY created_at DESC LIMIT 1", (key,),
                ).fetchone()
                found.append(ConversationActivity(
                    key, Heard(InboundMessage.model_validate_json(payload), InboundState(state), at),
                    _said(said) if said else None,
                    waiting.get((key, InboundState.PENDING.value), 0), waiting.get((key, InboundState.HELD.value), 0)))
            return found

        return await self._run(op)

    async def transcript(self, conversation_key: str, limit: int) -> list[Heard | Said]:
        def op(conn: sqlite3.Connection) -> list[Heard | Said]:
            heard: list[Heard | Said] = [
                Heard(InboundMessage.model_validate_json(payload), InboundState(state), at)
                for payload, state, at in conn.execute(
                    "SELECT payload, state, received_at FROM inbound WHERE conversation = ? ORDER BY received_at DESC, seq DESC"
                    " LIMIT ?", (conversation_key, limit))
            ]
            said: list[Heard | Said] = [_said(row) for row in conn.execute(
                "SELECT payload, state, created_at FROM outbox WHERE conversation = ? ORDER BY created_at DESC LIMIT ?",
                (conversation_key, limit))]
            return sorted(heard + said, key=lambda entry: entry.at)

        return await self._run(op)


def _said(row: tuple) -> Said:
    payload, state, at = row
    return Said(OutboundReply.model_validate_json(payload), ReplyState(state), at)
