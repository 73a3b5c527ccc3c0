"""The memory service as a turn sees it: who is speaking, what may be read, what is written.

:class:`MemoryService` is the one implementation of the tools' seams
(``MemoryGates`` for ``memory_read``/``memory_write``, ``HistorySearch`` for
``history_search``) and gives the loop each turn's :class:`~brain.memory.scopes.Session`
and the system-prompt blocks for the turn's readable scopes.  Every one of
these starts from the *turn*, resolves the speaker to a person and asks
``brain.memory.scopes`` for the scopes -- no caller can pass a scope, a
person or a conversation, so none can name someone else's.

Writes go to the trace (facts) or through the preference gate, with the
provenance of the turn: partner, conversation, the latest message's event id
and the speaker.  After a new fact, a background consolidation starts once
enough facts are uncovered.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from brain.memory import consolidate, people, preferences, trace
from brain.memory.consolidate import Consolidator
from brain.memory.scopes import (
    Scope,
    ScopeKind,
    Session,
    identity_of,
    session_of,
    teacher_of,
)
from brain.memory.store import MemoryStore
from brain.session_log import AssistantSaid, SessionLog, TurnStarted, UserSaid
from brain.tools.services import HistoryHit, MemoryEntry, WriteResult
from gateway.core.config import ModelSettings, PartnerConfig
from gateway.core.turns import Turn

log = logging.getLogger(__name__)

CONTEXT_FACTS = 20
"""Facts not yet consolidated that a system prompt shows, newest kept."""
BLOCK_CHARS = 4000
HEADINGS = {
    ScopeKind.LEARNER: "What you remember about the learner you are talking with "
                       "(theirs alone: never repeat it to anyone else):",
    ScopeKind.GROUP: "What you remember about this group chat:",
    ScopeKind.OWNER: "What you remember about your teacher, who is the person you are talking with:",
    ScopeKind.PARTNER_NOTES: "Your teacher's notes for you (follow them; do not quote them to learners):",
}


def _when(at: float) -> datetime:
    return datetime.fromtimestamp(at, UTC)


def _entry(item: trace.Fact | preferences.Preference, kind: Literal["fact", "preference"]) -> MemoryEntry:
    return MemoryEntry(text=item.text, key=item.topic, kind=kind, created_at=_when(item.at))


class MemoryService:
    def __init__(
        self,
        store: MemoryStore,
        log_: SessionLog,
        *,
        consolidator: Consolidator | None = None,
        settings_for: Callable[[PartnerConfig], ModelSettings | None] = lambda _partner: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.log = log_
        self.consolidator = consolidator
        self.settings_for = settings_for
        """The model that consolidates a partner's memory (the partner's own); None: no consolidation."""
        self.clock = clock

    # ------------------------------------------------------------------ the turn's session

    async def session(self, turn: Turn) -> Session:
        """The speaker as a person (created on their first message) and everything keyed by them."""
        teacher, identity, name = teacher_of(turn.partner), identity_of(turn), turn.sender.display_name
        person = await self.store.run(lambda conn: people.resolve(conn, teacher, identity, name, self.clock()))
        return session_of(turn, person)

    # ------------------------------------------------------------------ MemoryGates

    async def read(self, turn: Turn, *, query: str | None = None, key: str | None = None, limit: int = 10) -> list[MemoryEntry]:
        scope = (await self.session(turn)).writable

        def read(conn: sqlite3.Connection) -> list[MemoryEntry]:
            found = [_entry(f, "fact") for f in trace.find(conn, scope, query=query, topic=key, limit=limit)]
            prefs = [p for p in preferences.preferences(conn, scope) if key is None or p.topic == key]
            if query:
                wanted = trace.terms(query)
                prefs = [p for p in prefs if wanted & trace.terms(f"{p.topic or ''} {p.text}")]
            return [_entry(p, "preference") for p in reversed(prefs)] + found

        return (await self.store.run(read))[:limit]

    async def write(self, turn: Turn, entry: MemoryEntry) -> WriteResult:
        session = await self.session(turn)
        scope, now = session.writable, self.clock()
        provenance = trace.Provenance(
            partner=turn.partner.id, conversation=turn.address.conversation_key,
            event_id=turn.messages[-1].event_id if turn.messages else "", speaker=session.person,
        )
        if entry.kind == "preference":
            result = await self.store.run(lambda conn: preferences.gate(conn, scope, entry.text, entry.key, provenance, now))
            log.info("preference gate scope=%s created=%s replaced=%s refused=%s", scope.kind.value, result.created,
                     result.replaced is not None, result.refused is not None)
            return WriteResult(
                created=result.created, refused=result.refused,
                existing=_entry(result.existing, "preference") if result.existing else None,
                replaced=_entry(result.replaced, "preference") if result.replaced else None,
            )

        def append(conn: sqlite3.Connection) -> tuple[trace.Fact, bool, int]:
            fact, created = trace.append(conn, scope, entry.text, entry.key, provenance, now)
            return fact, created, len(consolidate.uncovered(conn, scope)) if created else 0

        fact, created, uncovered = await self.store.run(append)
        log.info("fact noted scope=%s fact=%d created=%s", scope.kind.value, fact.id, created)
        if created and self.consolidator is not None:
            self.consolidator.maybe_start(scope, self.settings_for(turn.partner), uncovered,
                                          charge_to=(turn.partner.id, session.usage_key))
        return WriteResult(created=True) if created else WriteResult(created=False, existing=_entry(fact, "fact"))

    # ------------------------------------------------------------------ HistorySearch

    async def search_history(self, turn: Turn, query: str, limit: int) -> list[HistoryHit]:
        """The turn's own history only (the person's with this partner, or the group's); the turn itself left out."""
        entries = await self.log.read((await self.session(turn)).history_key)
        current = next((e.event.turn for e in reversed(entries) if isinstance(e.event, TurnStarted)), None)
        wanted = trace.terms(query)
        scored: list[tuple[int, int, HistoryHit]] = []
        for entry in entries:
            event = entry.event
            if event.turn == current:
                continue
            if isinstance(event, UserSaid) and event.text:
                hit = HistoryHit(at=event.at, speaker=event.sender or "the learner", text=event.text)
            elif isinstance(event, AssistantSaid) and event.text:
                hit = HistoryHit(at=event.at, speaker="you", text=event.text)
            else:
                continue
            score = len(wanted & trace.terms(hit.text))
            if score:
                scored.append((score, entry.seq, hit))
        scored.sort(key=lambda item: (-item[0], -item[1]))
        return [hit for _score, _seq, hit in scored[:limit]]

    # ------------------------------------------------------------------ the system prompt

    async def context_blocks(self, turn: Turn, session: Session | None = None) -> list[str]:
        """One block per readable scope that holds anything: notes, newer facts, preferences."""
        session = session or await self.session(turn)

        def read(conn: sqlite3.Connection) -> list[str]:
            return [block for scope in session.readable if (block := _block(conn, scope))]

        return await self.store.run(read)


def _block(conn: sqlite3.Connection, scope: Scope) -> str:
    doc = consolidate.load(conn, scope)
    parts = [consolidate.strip_footnotes(doc.markdown)] if doc is not None and doc.markdown.strip() else []
    if scope.kind is not ScopeKind.PARTNER_NOTES:
        newer = consolidate.uncovered(conn, scope)[-CONTEXT_FACTS:]
        if newer:
            heading = "Noted since:" if parts else "Noted:"
            parts.append(heading + "\n" + "\n".join(f"- {f.text}" for f in newer))
        prefs = preferences.preferences(conn, scope)
        if prefs:
            parts.append("Preferences:\n" + "\n".join(f"- {p.text}" for p in prefs))
    if not parts:
        return ""
    body = "\n\n".join(parts)
    if len(body) > BLOCK_CHARS:
        body = body[:BLOCK_CHARS].rsplit("\n", 1)[0] + "\n[...]"
    return f"{HEADINGS[scope.kind]}\n{body}"

