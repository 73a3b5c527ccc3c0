"""The session log: an append-only, event-sourced record of each conversation.

Everything a model request is made of is an event here -- the turn's system
prompt and tool list, what the learner said, what the model answered (with its
reasoning, kept for the teacher and never shown), tool results, summaries --
so every request can be rebuilt from the log alone (``brain.context``), and a
test does exactly that against the digests recorded when the requests went out.

The log lives in its own SQLite file next to the gateway's store: the brain
does not reach into the pipeline's tables, and the pipeline does not read
conversations.
"""

from __future__ import annotations

import asyncio
import json
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from brain.sqlite_file import SqliteFile
from brain.types import ToolCall, ToolSpec, Usage
from gateway.store.schema import Schema


def _now() -> datetime:
    return datetime.now(UTC)


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    turn: str
    at: datetime = Field(default_factory=_now)


class TurnStarted(_Event):
    kind: Literal["turn_started"] = "turn_started"
    partner: str
    learner: str
    model: str
    system: str
    tools: tuple[ToolSpec, ...] = ()
    text_tool_protocol: bool = False
    removed_tools: dict[str, str] = Field(default_factory=dict)
    """Each tool the context took away, with the reason (tool subtraction, logged per turn)."""


class UserSaid(_Event):
    kind: Literal["user"] = "user"
    event_id: str
    sender: str
    """The name the model sees (a display name, else the user id)."""
    text: str
    user: str = ""
    """The sender's user id on the channel; lets ``/forget`` find a learner's words in a group's log."""


class AssistantSaid(_Event):
    kind: Literal["assistant"] = "assistant"
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str = ""
    """Think-tag content: kept for the teacher and for debugging, never sent to a learner."""


class ToolReturned(_Event):
    kind: Literal["tool"] = "tool"
    call_id: str
    name: str
    text: str
    is_error: bool = False


class Nudged(_Event):
    """An instruction the loop added (continue after a length cut, answer an empty reply, wrap up)."""

    kind: Literal["nudge"] = "nudge"
    text: str
    withdraw_tools: bool = False


class ModelRequested(_Event):
    kind: Literal["model_requested"] = "model_requested"
    round: int
    digest: str


class ModelAnswered(_Event):
    kind: Literal["model_answered"] = "model_answered"
    model: str
    finish_reason: str
    usage: Usage = Usage()


class Summarized(_Event):
    """Older history folded into a summary; requests after it use the summary instead."""

    kind: Literal["summary"] = "summary"
    text: str
    covers_through: int
    """The last sequence number the summary stands in for."""


class CommandRan(_Event):
    """A learner command (``/link``, ``/export``...) answered by the brain itself, never shown to the model."""

    kind: Literal["command"] = "command"
    event_id: str
    command: str


class TurnEnded(_Event):
    kind: Literal["turn_ended"] = "turn_ended"
    outcome: Literal["answered", "stopped", "budget", "model_unavailable", "silent"]


LogEvent = Annotated[
    TurnStarted | UserSaid | AssistantSaid | ToolReturned | Nudged | ModelRequested | ModelAnswered | Summarized | CommandRan | TurnEnded,
    Field(discriminator="kind"),
]
_EVENT = TypeAdapter(LogEvent)


class Entry(BaseModel):
    model_config = ConfigDict(frozen=True)
    seq: int
    event: LogEvent


def _prefix_range(prefix: str) -> tuple[str, str]:
    """``[low, high)`` bounds of every string starting with ``prefix`` (an index range, unlike LIKE)."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


@dataclass(frozen=True)
class ConversationActivity:
    """One conversation at a glance: who it is with and how lively, for the teacher's lists."""

    key: str
    partner: str
    """The partner of its latest turn ("" if no turn started yet)."""
    messages: int
    """Messages learners sent (``user`` events)."""
    last_message_at: datetime | None
    users: frozenset[str]
    """User ids that spoke in it."""


class SessionLog(SqliteFile):
    """Append-only per-conversation log in SQLite; one short lock-protected write at a time.

    Append-only for the tutor: only the memory controls rewrite it -- merging two people's logs when
    they are linked, and deleting or redacting what a learner asked to forget."""

    CACHED_CONVERSATIONS = 512

    schema = Schema("session log", ("""
        CREATE TABLE IF NOT EXISTS session_events (
            seq INTEGER PRIMARY KEY, conversation TEXT NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL);
        CREATE INDEX IF NOT EXISTS session_events_by_conversation ON session_events (conversation, seq);
        CREATE TABLE IF NOT EXISTS session_versions (conversation TEXT PRIMARY KEY, version INTEGER NOT NULL);
    """,), owns_file=False)  # brain.db, beside the usage ledger

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._cache: OrderedDict[str, tuple[int, list[Entry]]] = OrderedDict()
        """Parsed entries of recently read conversations.  Every round reads its whole conversation;
        re-parsing it each time made a round's cost grow with the conversation's length."""

    def _append(self, conversation: str, events: Sequence[_Event]) -> list[int]:
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN")
            seqs = [
                conn.execute(
                    "INSERT INTO session_events (conversation, kind, payload) VALUES (?, ?, ?)",
                    (conversation, event.kind, event.model_dump_json()),  # type: ignore[attr-defined]
                ).lastrowid
                for event in events
            ]
            conn.execute("COMMIT")
            cached = self._cache.get(conversation)
            if cached is not None:
                cached[1].extend(Entry(seq=seq, event=event) for seq, event in zip(seqs, events, strict=True) if seq is not None)  # type: ignore[arg-type]
            return [s for s in seqs if s is not None]

    def _read(self, conversation: str, after: int) -> list[Entry]:
        with self._lock:
            conn = self._connect()
            # One indexed probe tells whether the cached copy is still the log: another process (the
            # memory CLI) may have appended, erased or -- bumping the version -- rewritten it in place.
            count, last, version = conn.execute(
                "SELECT COUNT(*), COALESCE(MAX(seq), 0),"
                " (SELECT version FROM session_versions WHERE conversation = ?)"
                " FROM session_events WHERE conversation = ?",
                (conversation, conversation),
            ).fetchone()
            version = version or 0
            cached = self._cache.get(conversation)
            entries = cached[1] if cached else []
            if cached is None or cached[0] != version or len(entries) != count or (entries[-1].seq if entries else 0) != last:
                rows = conn.execute(
                    "SELECT seq, payload FROM session_events WHERE conversation = ? ORDER BY seq", (conversation,)
                ).fetchall()
                entries = [Entry(seq=seq, event=_EVENT.validate_json(payload)) for seq, payload in rows]
                self._cache[conversation] = (version, entries)
                if len(self._cache) > self.CACHED_CONVERSATIONS:
                    self._cache.popitem(last=False)
            self._cache.move_to_end(conversation)
            start = bisect_right([e.seq for e in entries], after) if after else 0
            return list(entries[start:])

    async def append(self, conversation: str, *events: _Event) -> list[int]:
        return await asyncio.to_thread(self._append, conversation, events)

    async def read(self, conversation: str, after: int = 0) -> list[Entry]:
        return await asyncio.to_thread(self._read, conversation, after)

    async def forget(self, conversation: str) -> int:
        def delete() -> int:
            with self._lock:
                return self._connect().execute("DELETE FROM session_events WHERE conversation = ?", (conversation,)).rowcount

        return await asyncio.to_thread(delete)

    # ------------------------------------------------------------------ keys under a prefix (people, groups)

    def _keys(self, prefix: str) -> list[str]:
        with self._lock:
            rows = self._connect().execute(
                "SELECT DISTINCT conversation FROM session_events WHERE conversation >= ? AND conversation < ?",
                _prefix_range(prefix),
            ).fetchall()
        return [row[0] for row in rows]

    async def keys(self, prefix: str) -> list[str]:
        """Every conversation whose key starts with ``prefix`` (a person's logs: ``person:<id>:``)."""
        return await asyncio.to_thread(self._keys, prefix)

    async def forget_prefix(self, prefix: str) -> int:
        """Delete every conversation whose key starts with ``prefix``; the events removed."""

        def delete() -> int:
            with self._lock:
                return self._connect().execute(
                    "DELETE FROM session_events WHERE conversation >= ? AND conversation < ?", _prefix_range(prefix)
                ).rowcount

        return await asyncio.to_thread(delete)

    def _activity(self) -> list[ConversationActivity]:
        with self._lock:
            conn = self._connect()
            said = conn.execute(
                "SELECT conversation, COUNT(*), MAX(json_extract(payload, '$.at')),"
                " json_group_array(DISTINCT json_extract(payload, '$.user'))"
                " FROM session_events WHERE kind = 'user' GROUP BY conversation"
            ).fetchall()
            partners = dict(conn.execute(
                "SELECT conversation, json_extract(payload, '$.partner') FROM session_events"
                " WHERE seq IN (SELECT MAX(seq) FROM session_events WHERE kind = 'turn_started' GROUP BY conversation)"
            ).fetchall())
        found = {
            key: ConversationActivity(key, partners.get(key) or "", count, datetime.fromisoformat(last) if last else None,
                                      frozenset(u for u in json.loads(users) if u))
            for key, count, last, users in said
        }
        for key, partner in partners.items():
            found.setdefault(key, ConversationActivity(key, partner or "", 0, None, frozenset()))
        return list(found.values())

    async def activity(self) -> list[ConversationActivity]:
        """Every conversation in the log with its partner, message count and last message time."""
        return await asyncio.to_thread(self._activity)

    async def conversations_with(self, prefix: str, user: str) -> list[str]:
        """Conversations under ``prefix`` where ``user`` spoke or started a turn (for ``/forget``)."""

        def find() -> list[str]:
            with self._lock:
                rows = self._connect().execute(
                    "SELECT DISTINCT conversation FROM session_events WHERE conversation >= ? AND conversation < ?"
                    " AND ((kind = 'user' AND json_extract(payload, '$.user') = ?)"
                    " OR (kind = 'turn_started' AND json_extract(payload, '$.learner') = ?))",
                    (*_prefix_range(prefix), user, user),
                ).fetchall()
            return [row[0] for row in rows]

        return await asyncio.to_thread(find)

    async def rewrite(self, conversations: Sequence[str], edit: Callable[[list[Entry]], dict[int, LogEvent | None]]) -> int:
        """Replace events in place (the one exception to append-only: erasure).  ``edit`` gets one
        conversation's entries and returns ``{seq: new event, or None to delete}``; all in one transaction."""

        def run() -> int:
            with self._lock:
                conn = self._connect()
                changes: dict[int, LogEvent | None] = {}
                for conversation in conversations:
                    rows = conn.execute(
                        "SELECT seq, payload FROM session_events WHERE conversation = ? ORDER BY seq", (conversation,)
                    ).fetchall()
                    changes |= edit([Entry(seq=seq, event=_EVENT.validate_json(payload)) for seq, payload in rows])
                conn.execute("BEGIN")
                try:
                    for seq, event in changes.items():
                        if event is None:
                            conn.execute("DELETE FROM session_events WHERE seq = ?", (seq,))
                        else:
                            conn.execute("UPDATE session_events SET kind = ?, payload = ? WHERE seq = ?",
                                         (event.kind, event.model_dump_json(), seq))
                    conn.executemany(
                        "INSERT INTO session_versions (conversation, version) VALUES (?, 1)"
                        " ON CONFLICT (conversation) DO UPDATE SET version = version + 1",
                        [(conversation,) for conversation in conversations],
                    )
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                return len(changes)

        return await asyncio.to_thread(run)

    async def merge(self, source: str, into: str) -> int:
        """Fold ``source``'s conversation into ``into`` (two linked identities become one person).

        Both logs are rewritten under ``into`` as one, turn by turn in the order the turns began, each
        turn's events together; summaries are dropped (their ``covers_through`` points into the old
        numbering) and the next turn summarizes again if the history outgrew the window.  Requests sent
        before the merge can no longer be rebuilt from the merged log; their digests stay recorded."""

        def rewrite() -> int:
            with self._lock:
                conn = self._connect()
                rows = conn.execute(
                    "SELECT conversation, kind, payload FROM session_events WHERE conversation IN (?, ?) ORDER BY seq",
                    (source, into),
                ).fetchall()
                moved = sum(1 for key, _kind, _payload in rows if key == source)
                if not moved:
                    return 0
                turns: dict[str, list[tuple[str, str]]] = {}  # first event's order = the order turns began
                for _key, kind, payload in rows:
                    if kind != "summary":
                        turns.setdefault(_EVENT.validate_json(payload).turn, []).append((kind, payload))
                conn.execute("BEGIN")
                try:
                    conn.execute("DELETE FROM session_events WHERE conversation IN (?, ?)", (source, into))
                    conn.executemany(
                        "INSERT INTO session_events (conversation, kind, payload) VALUES (?, ?, ?)",
                        [(into, kind, payload) for events in turns.values() for kind, payload in events],
                    )
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
                return moved

        return await asyncio.to_thread(rewrite)

