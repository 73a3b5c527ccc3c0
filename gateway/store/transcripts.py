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
from dataclasses import dataclass
from typing import Protocol

from gateway.core.messages import InboundMessage, OutboundReply
from gateway.store import InboundState, ReplyState
from gateway.store.rows import OnWriter


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


class TranscriptRows(OnWriter):
    """:class:`TranscriptStore` over the SQLite tables (mixed into ``SqliteStore``, on its writer thread)."""

    async def conversations(self, limit: int) -> list[ConversationActivity]:
        def op(conn: sqlite3.Connection) -> list[ConversationActivity]:
            keys = [key for (key,) in conn.execute(
                "SELECT conversation FROM inbound GROUP BY conversation ORDER BY MAX(received_at) DESC LIMIT ?", (limit,))]
            waiting: dict[tuple[str, str], int] = {
                (key, state): count for key, state, count in conn.execute(
                    "SELECT conversation, state, COUNT(*) FROM inbound WHERE state IN (?, ?) GROUP BY conversation, state",
                    (InboundState.PENDING.value, InboundState.HELD.value))
            }
            found = []
            for key in keys:
                heard = _last_heard(conn, key)
                if heard is None:  # only the bot's own echoes were heard there
                    continue
                said = conn.execute(
                    "SELECT payload, state, created_at FROM outbox WHERE conversation = ? ORDER BY created_at DESC LIMIT 1", (key,),
                ).fetchone()
                found.append(ConversationActivity(key, heard, _said(said) if said else None,
                                                  waiting.get((key, InboundState.PENDING.value), 0),
                                                  waiting.get((key, InboundState.HELD.value), 0)))
            return found

        return await self._run(op)

    async def transcript(self, conversation_key: str, limit: int) -> list[Heard | Said]:
        def op(conn: sqlite3.Connection) -> list[Heard | Said]:
            heard: list[Heard | Said] = [
                entry for entry in (_heard(row) for row in conn.execute(
                    "SELECT payload, state, received_at FROM inbound WHERE conversation = ? ORDER BY received_at DESC, seq DESC"
                    " LIMIT ?", (conversation_key, limit)))
                if not entry.message.from_self  # the platform echoing our own replies: shown once, as said
            ]
            said: list[Heard | Said] = [_said(row) for row in conn.execute(
                "SELECT payload, state, created_at FROM outbox WHERE conversation = ? ORDER BY created_at DESC LIMIT ?",
                (conversation_key, limit))]
            return sorted(heard + said, key=lambda entry: entry.at)

        return await self._run(op)


ECHO_SCAN = 50
"""How far back a conversation's latest message is looked for past the bot's own echoes."""


def _heard(row: tuple) -> Heard:
    payload, state, at = row
    return Heard(InboundMessage.model_validate_json(payload), InboundState(state), at)


def _last_heard(conn: sqlite3.Connection, key: str) -> Heard | None:
    """The conversation's latest message from someone other than the bot itself."""
    for row in conn.execute("SELECT payload, state, received_at FROM inbound WHERE conversation = ? ORDER BY seq DESC LIMIT ?",
                            (key, ECHO_SCAN)):
        heard = _heard(row)
        if not heard.message.from_self:
            return heard
    return None


def _said(row: tuple) -> Said:
    payload, state, at = row
    return Said(OutboundReply.model_validate_json(payload), ReplyState(state), at)
