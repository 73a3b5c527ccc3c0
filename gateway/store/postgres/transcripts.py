"""Conversations as the PostgreSQL store keeps them: :class:`~gateway.store.transcripts.TranscriptStore` for a fleet.

Nothing is written here: the inbox and the outbox (the core's tables, :mod:`gateway.store.postgres.engine`)
are the transcript, as on SQLite (:mod:`gateway.store.transcripts`, whose row types these reads return).
The columns read are ``inbound (seq, conversation, payload, state, received_at)`` and ``outbox
(conversation, payload, state, created_at)``; ``payload::text`` reads the payload whether the core keeps
it as ``jsonb`` or ``text``.  A conversation's activity is read in one transaction, so a node answering
meanwhile shows up whole or not at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.core.messages import InboundMessage, OutboundReply
from gateway.store import InboundState, ReplyState
from gateway.store.postgres.rows import OnPool
from gateway.store.transcripts import ECHO_SCAN, ConversationActivity, Heard, Said

if TYPE_CHECKING:
    from psycopg import AsyncConnection

DDL: tuple[str, ...] = (
    # The index the echo scan's ``ORDER BY seq`` per conversation needs; the core's tables (and their
    # ``(conversation, received_at)`` and ``(conversation, created_at)`` indexes) are the core's.
    "CREATE INDEX IF NOT EXISTS inbound_by_conversation_seq ON inbound (conversation, seq)",
)
"""The transcripts' index on the core's inbox, for the PostgreSQL migrations (after the core's tables)."""


def _heard(row: tuple[Any, ...]) -> Heard:
    payload, state, at = row
    return Heard(InboundMessage.model_validate_json(payload), InboundState(state), at)


def _said(row: tuple[Any, ...]) -> Said:
    payload, state, at = row
    return Said(OutboundReply.model_validate_json(payload), ReplyState(state), at)


async def _last_heard(conn: AsyncConnection, key: str) -> Heard | None:
    """The conversation's latest message from someone other than the bot itself."""
    cursor = await conn.execute(
        "SELECT payload::text, state, received_at FROM inbound WHERE conversation = %s ORDER BY seq DESC LIMIT %s",
        (key, ECHO_SCAN))
    for row in await cursor.fetchall():
        heard = _heard(row)
        if not heard.message.from_self:
            return heard
    return None


class PgTranscriptRows(OnPool):
    """:class:`~gateway.store.transcripts.TranscriptStore` over the PostgreSQL inbox and outbox."""

    async def conversations(self, limit: int) -> list[ConversationActivity]:
        async def op(conn: AsyncConnection) -> list[ConversationActivity]:
            cursor = await conn.execute(
                "SELECT conversation FROM inbound GROUP BY conversation ORDER BY MAX(received_at) DESC LIMIT %s", (limit,))
            keys = [key for (key,) in await cursor.fetchall()]
            cursor = await conn.execute(
                "SELECT conversation, state, COUNT(*) FROM inbound WHERE state IN (%s, %s) AND conversation = ANY(%s)"
                " GROUP BY conversation, state", (InboundState.PENDING.value, InboundState.HELD.value, keys))
            waiting: dict[tuple[str, str], int] = {(key, state): int(count) for key, state, count in await cursor.fetchall()}
            found = []
            for key in keys:
                heard = await _last_heard(conn, key)
                if heard is None:  # only the bot's own echoes were heard there
                    continue
                said = await (await conn.execute(
                    "SELECT payload::text, state, created_at FROM outbox WHERE conversation = %s"
                    " ORDER BY created_at DESC LIMIT 1", (key,))).fetchone()
                found.append(ConversationActivity(key, heard, _said(said) if said else None,
                                                  waiting.get((key, InboundState.PENDING.value), 0),
                                                  waiting.get((key, InboundState.HELD.value), 0)))
            return found

        return await self._tx(op)

    async def transcript(self, conversation_key: str, limit: int) -> list[Heard | Said]:
        async def op(conn: AsyncConnection) -> list[Heard | Said]:
            cursor = await conn.execute(
                "SELECT payload::text, state, received_at FROM inbound WHERE conversation = %s"
                " ORDER BY received_at DESC, seq DESC LIMIT %s", (conversation_key, limit))
            heard: list[Heard | Said] = [
                entry for entry in (_heard(row) for row in await cursor.fetchall())
                if not entry.message.from_self  # the platform echoing our own replies: shown once, as said
            ]
            cursor = await conn.execute(
                "SELECT payload::text, state, created_at FROM outbox WHERE conversation = %s"
                " ORDER BY created_at DESC LIMIT %s", (conversation_key, limit))
            said: list[Heard | Said] = [_said(row) for row in await cursor.fetchall()]
            return sorted(heard + said, key=lambda entry: entry.at)

        return await self._tx(op)
