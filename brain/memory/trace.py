"""The trace: an append-only record of observed facts per scope, each with where it came from.

A fact is what the model chose to note (``memory_write``), stored with its
provenance: the partner, the conversation and the message (event id) of the
turn that noted it, and the person speaking.  Facts are never edited; a
teacher may delete a scope's facts and a learner may erase their own
(``/forget``), nothing else removes one.  Noting a fact the scope already
holds (same words, ignoring case and spacing) appends nothing and returns the
fact that was there -- the tool contract "writing the same fact twice is
harmless".

Consolidated documents (``brain.memory.consolidate``) cite facts by id, which
is how a footnote in the Markdown leads back to the message it came from.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from brain.memory.scopes import Scope

_COLUMNS = "id, scope_kind, teacher, scope_key, text, topic, partner, conversation, event_id, speaker, at"


@dataclass(frozen=True)
class Provenance:
    partner: str
    conversation: str
    """The conversation key where it was said (``channel:account:chat``)."""
    event_id: str
    """The message's event id; the session log's ``UserSaid.event_id`` holds the same."""
    speaker: str
    """The person speaking in that turn."""


@dataclass(frozen=True)
class Fact:
    id: int
    scope: Scope
    text: str
    topic: str | None
    provenance: Provenance
    at: float


def normal(text: str) -> str:
    return " ".join(text.casefold().split())


def terms(text: str) -> set[str]:
    return {word for word in re.findall(r"\w+", text.casefold()) if len(word) > 1}


def _fact(row: tuple) -> Fact:
    id_, kind, teacher, key, text, topic, partner, conversation, event_id, speaker, at = row
    return Fact(id_, Scope.from_columns(kind, teacher, key), text, topic, Provenance(partner, conversation, event_id, speaker), at)


def append(conn: sqlite3.Connection, scope: Scope, text: str, topic: str | None, provenance: Provenance, at: float) -> tuple[Fact, bool]:
    """``(fact, True)`` when appended; ``(the fact already held, False)`` for a duplicate."""
    held = conn.execute(
        f"SELECT {_COLUMNS} FROM trace WHERE scope_kind = ? AND teacher = ? AND scope_key = ? AND norm = ? ORDER BY id LIMIT 1",
        (*scope.columns, normal(text)),
    ).fetchone()
    if held is not None:
        return _fact(held), False
    cursor = conn.execute(
        "INSERT INTO trace (scope_kind, teacher, scope_key, text, topic, norm, partner, conversation, event_id, speaker, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*scope.columns, text, topic, normal(text), provenance.partner, provenance.conversation,
         provenance.event_id, provenance.speaker, at),
    )
    return Fact(int(cursor.lastrowid or 0), scope, text, topic, provenance, at), True


def facts(conn: sqlite3.Connection, scope: Scope, *, limit: int | None = None) -> list[Fact]:
    """The scope's facts, oldest first; with ``limit``, only the newest ``limit`` of them."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM trace WHERE scope_kind = ? AND teacher = ? AND scope_key = ? ORDER BY id DESC LIMIT ?",
        (*scope.columns, -1 if limit is None else limit),
    ).fetchall()
    return [_fact(row) for row in reversed(rows)]


def by_ids(conn: sqlite3.Connection, ids: Iterable[int]) -> dict[int, Fact]:
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    marks = ",".join("?" * len(wanted))
    rows = conn.execute(f"SELECT {_COLUMNS} FROM trace WHERE id IN ({marks})", wanted).fetchall()
    return {row[0]: _fact(row) for row in rows}


def find(conn: sqlite3.Connection, scope: Scope, *, query: str | None, topic: str | None, limit: int) -> list[Fact]:
    """Newest first: by exact ``topic``, then by how many of the query's words a fact shares."""
    found = list(reversed(facts(conn, scope)))
    if topic is not None:
        found = [f for f in found if f.topic == topic]
    if query:
        wanted = terms(query)
        scored = [(len(wanted & terms(f"{f.topic or ''} {f.text}")), f) for f in found]
        scored.sort(key=lambda pair: -pair[0])  # stable: ties stay newest first
        found = [f for score, f in scored if score]
    return found[:limit]


def rekey(conn: sqlite3.Connection, source: Scope, target: Scope) -> None:
    """Move ``source``'s facts into ``target`` (a merge of two people).  A fact both held stays twice:
    two observations, each with its own provenance."""
    conn.execute(
        "UPDATE trace SET scope_kind = ?, teacher = ?, scope_key = ? WHERE scope_kind = ? AND teacher = ? AND scope_key = ?",
        (*target.columns, *source.columns),
    )


def delete_scope(conn: sqlite3.Connection, scope: Scope) -> int:
    return conn.execute(
        "DELETE FROM trace WHERE scope_kind = ? AND teacher = ? AND scope_key = ?", scope.columns
    ).rowcount


def spoken_by(conn: sqlite3.Connection, person: str) -> list[Fact]:
    """Every fact noted while ``person`` was speaking, in any scope."""
    return [_fact(row) for row in conn.execute(f"SELECT {_COLUMNS} FROM trace WHERE speaker = ? ORDER BY id", (person,))]


def delete_spoken_by(conn: sqlite3.Connection, person: str) -> tuple[int, set[Scope]]:
    """Erase every fact noted while ``person`` was speaking (in groups too): how many, and the scopes touched."""
    rows = conn.execute("SELECT DISTINCT scope_kind, teacher, scope_key FROM trace WHERE speaker = ?", (person,)).fetchall()
    count = conn.execute("DELETE FROM trace WHERE speaker = ?", (person,)).rowcount
    return count, {Scope.from_columns(*row) for row in rows}


def reattribute(conn: sqlite3.Connection, old: str, new: str) -> None:
    """Facts noted while ``old`` spoke now count as ``new``'s (``old`` was merged into ``new``)."""
    conn.execute("UPDATE trace SET speaker = ? WHERE speaker = ?", (new, old))
