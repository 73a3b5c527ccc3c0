"""Preferences: how a learner (or a group) likes to learn, through one narrow, idempotent gate.

The gate, in order:

1. the same preference already held (same words, ignoring case and spacing)
   -> nothing is written; the entry that was there is reported;
2. a preference with the same topic (``language``, ``pace``) already held
   -> it is replaced, and the old wording is reported;
3. the scope holds :data:`MAX_PREFERENCES` already -> refused, with the reason;
4. otherwise it is added.

So a model that repeats itself cannot grow the list, and a changed mind
("slower, please") updates one entry instead of contradicting an old one.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from brain.memory.scopes import Scope
from brain.memory.trace import Provenance, normal

MAX_PREFERENCES = 30
_COLUMNS = "id, scope_kind, teacher, scope_key, text, topic, partner, conversation, event_id, speaker, at"


@dataclass(frozen=True)
class Preference:
    id: int
    scope: Scope
    text: str
    topic: str | None
    provenance: Provenance
    at: float


@dataclass(frozen=True)
class GateResult:
    created: bool
    existing: Preference | None = None
    """The entry already holding this preference (nothing was written)."""
    replaced: Preference | None = None
    """The entry of the same topic that this one replaced."""
    refused: str | None = None


def _preference(row: tuple) -> Preference:
    id_, kind, teacher, key, text, topic, partner, conversation, event_id, speaker, at = row
    return Preference(id_, Scope.from_columns(kind, teacher, key), text, topic, Provenance(partner, conversation, event_id, speaker), at)


def preferences(conn: sqlite3.Connection, scope: Scope) -> list[Preference]:
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM preferences WHERE scope_kind = ? AND teacher = ? AND scope_key = ? ORDER BY id",
        scope.columns,
    ).fetchall()
    return [_preference(row) for row in rows]


def gate(conn: sqlite3.Connection, scope: Scope, text: str, topic: str | None, provenance: Provenance, at: float) -> GateResult:
    held = preferences(conn, scope)
    same = next((p for p in held if normal(p.text) == normal(text)), None)
    if same is not None:
        return GateResult(created=False, existing=same)
    values = (text, topic, normal(text), provenance.partner, provenance.conversation, provenance.event_id, provenance.speaker, at)
    old = next((p for p in held if topic is not None and p.topic == topic), None)
    if old is not None:
        conn.execute(
            "UPDATE preferences SET text = ?, topic = ?, norm = ?, partner = ?, conversation = ?, event_id = ?,"
            " speaker = ?, at = ? WHERE id = ?",
            (*values, old.id),
        )
        return GateResult(created=True, replaced=old)
    if len(held) >= MAX_PREFERENCES:
        return GateResult(created=False, refused=f"this scope already holds {MAX_PREFERENCES} preferences; "
                                                  "give a topic to replace one of them")
    conn.execute(
        "INSERT INTO preferences (scope_kind, teacher, scope_key, text, topic, norm, partner, conversation, event_id,"
        " speaker, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*scope.columns, *values),
    )
    return GateResult(created=True)


def rekey(conn: sqlite3.Connection, source: Scope, target: Scope) -> None:
    """Move ``source``'s preferences into ``target``; where both have one, ``target``'s stays."""
    conn.execute(
        "DELETE FROM preferences WHERE scope_kind = ? AND teacher = ? AND scope_key = ? AND (norm IN"
        " (SELECT norm FROM preferences WHERE scope_kind = ? AND teacher = ? AND scope_key = ?) OR topic IN"
        " (SELECT topic FROM preferences WHERE scope_kind = ? AND teacher = ? AND scope_key = ? AND topic IS NOT NULL))",
        (*source.columns, *target.columns, *target.columns),
    )
    conn.execute(
        "UPDATE preferences SET scope_kind = ?, teacher = ?, scope_key = ? WHERE scope_kind = ? AND teacher = ? AND scope_key = ?",
        (*target.columns, *source.columns),
    )


def delete_scope(conn: sqlite3.Connection, scope: Scope) -> int:
    return conn.execute(
        "DELETE FROM preferences WHERE scope_kind = ? AND teacher = ? AND scope_key = ?", scope.columns
    ).rowcount


def spoken_by(conn: sqlite3.Connection, person: str) -> list[Preference]:
    return [_preference(row) for row in conn.execute(f"SELECT {_COLUMNS} FROM preferences WHERE speaker = ? ORDER BY id", (person,))]


def delete_spoken_by(conn: sqlite3.Connection, person: str) -> int:
    return conn.execute("DELETE FROM preferences WHERE speaker = ?", (person,)).rowcount


def reattribute(conn: sqlite3.Connection, old: str, new: str) -> None:
    conn.execute("UPDATE preferences SET speaker = ? WHERE speaker = ?", (new, old))
