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
import sqlite3
import threading
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from brain.types import ToolCall, ToolSpec, Usage


def _now() -> datetime:
    return datetime.now(timezone.utc)


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
    text: str


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


class TurnEnded(_Event):
    kind: Literal["turn_ended"] = "turn_ended"
    outcome: Literal["answered", "stopped", "budget", "model_unavailable", "silent"]


LogEvent = Annotated[
    Union[TurnStarted, UserSaid, AssistantSaid, ToolReturned, Nudged, ModelRequested, ModelAnswered, Summarized, TurnEnded],
    Field(discriminator="kind"),
]
_EVENT = TypeAdapter(LogEvent)


class Entry(BaseModel):
    model_config = ConfigDict(frozen=True)
    seq: int
    event: LogEvent


class SessionLog:
    """Append-only per-conversation log in SQLite; one short lock-protected write at a time."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS session_events ("
                " seq INTEGER PRIMARY KEY, conversation TEXT NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL)"
            )
            conn.execute("CREATE INDEX IF NOT EXISTS session_events_by_conversation ON session_events (conversation, seq)")
            self._conn = conn
        return self._conn

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
            return [s for s in seqs if s is not None]

    def _read(self, conversation: str, after: int) -> list[Entry]:
        with self._lock:
            rows = self._connect().execute(
                "SELECT seq, payload FROM session_events WHERE conversation = ? AND seq > ? ORDER BY seq",
                (conversation, after),
            ).fetchall()
        return [Entry(seq=seq, event=_EVENT.validate_json(payload)) for seq, payload in rows]

    async def append(self, conversation: str, *events: _Event) -> list[int]:
        return await asyncio.to_thread(self._append, conversation, events)

    async def read(self, conversation: str, after: int = 0) -> list[Entry]:
        return await asyncio.to_thread(self._read, conversation, after)

    async def forget(self, conversation: str) -> int:
        def delete() -> int:
            with self._lock:
                return self._connect().execute("DELETE FROM session_events WHERE conversation = ?", (conversation,)).rowcount

        return await asyncio.to_thread(delete)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
