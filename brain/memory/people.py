"""People, not accounts: identities on channels, the person behind them, and link codes.

A *person* lives inside one teacher scope.  Each identity -- ``(channel,
account, user)``, since two bots of one platform may see one human under two
ids -- points at exactly one person of that teacher; a new identity gets a
new person on its first message.  Keeping people per teacher means a wrong
link made by one teacher can never mix two learners in another teacher's
memory, and a link code only works with the partners of the teacher whose
partner issued it.

Linking (``/link`` then ``/link CODE`` from the other identity, or the
teacher's ``partners people link``) *merges* two people: the code's person
absorbs the other, every identity of the absorbed person moves over, and the
caller re-keys the absorbed person's memory and history (``brain.memory.controls``).
Unlinking gives one identity a fresh, empty person; everything remembered so
far stays with the person it was linked to.

Codes are 8 characters from a 32-letter alphabet without look-alikes (40 bits),
single use, valid 10 minutes; issuing a new one retires the person's older code.
These are plain functions of a connection, run inside ``MemoryStore.run``.
"""

from __future__ import annotations

import secrets
import sqlite3
import uuid
from dataclasses import dataclass

from brain.memory.scopes import Identity

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 8
CODE_TTL_S = 600.0
FORGET_TTL_S = 600.0


@dataclass(frozen=True)
class Account:
    """An identity as the teacher sees it: who, under which name, since when."""

    identity: Identity
    display_name: str
    since: float


def find_person(conn: sqlite3.Connection, teacher: str, identity: Identity) -> str | None:
    row = conn.execute(
        "SELECT person FROM identities WHERE teacher = ? AND channel = ? AND account = ? AND user = ?",
        (teacher, identity.channel, identity.account, identity.user),
    ).fetchone()
    return row[0] if row else None


def _new_person(conn: sqlite3.Connection, teacher: str, now: float) -> str:
    person = uuid.uuid4().hex[:16]
    conn.execute("INSERT INTO persons (id, teacher, created_at) VALUES (?, ?, ?)", (person, teacher, now))
    return person


def resolve(conn: sqlite3.Connection, teacher: str, identity: Identity, display_name: str, now: float) -> str:
    """The person behind ``identity`` in ``teacher``'s scope, created on first sight."""
    person = find_person(conn, teacher, identity)
    if person is None:
        person = _new_person(conn, teacher, now)
        conn.execute(
            "INSERT INTO identities (teacher, channel, account, user, person, display_name, since) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (teacher, identity.channel, identity.account, identity.user, person, display_name, now),
        )
    elif display_name:
        conn.execute(
            "UPDATE identities SET display_name = ? WHERE teacher = ? AND channel = ? AND account = ? AND user = ?"
            " AND display_name != ?",
            (display_name, teacher, identity.channel, identity.account, identity.user, display_name),
        )
    return person


def accounts_of(conn: sqlite3.Connection, person: str) -> list[Account]:
    rows = conn.execute(
        "SELECT channel, account, user, display_name, since FROM identities WHERE person = ? ORDER BY since, channel",
        (person,),
    ).fetchall()
    return [Account(Identity(c, a, u), name, since) for c, a, u, name, since in rows]


def teacher_of_person(conn: sqlite3.Connection, person: str) -> str | None:
    row = conn.execute("SELECT teacher FROM persons WHERE id = ?", (person,)).fetchone()
    return row[0] if row else None


def normal_code(text: str) -> str:
    return "".join(ch for ch in text.upper() if ch.isalnum())


def issue_code(conn: sqlite3.Connection, teacher: str, person: str, now: float) -> str:
    conn.execute("DELETE FROM link_codes WHERE person = ? OR expires_at < ?", (person, now))
    while True:
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        if conn.execute("SELECT 1 FROM link_codes WHERE code = ?", (code,)).fetchone() is None:
            break
    conn.execute(
        "INSERT INTO link_codes (code, teacher, person, expires_at) VALUES (?, ?, ?, ?)",
        (code, teacher, person, now + CODE_TTL_S),
    )
    return code


def take_code(conn: sqlite3.Connection, teacher: str, code: str, now: float) -> str | None:
    """The person who issued ``code`` in this teacher scope; the code is used up.  None if unknown,
    expired or issued under another teacher (that code stays, for the scope it belongs to)."""
    row = conn.execute("SELECT teacher, person, expires_at FROM link_codes WHERE code = ?", (normal_code(code),)).fetchone()
    if row is None or row[0] != teacher:
        return None
    conn.execute("DELETE FROM link_codes WHERE code = ?", (normal_code(code),))
    return row[1] if row[2] >= now else None


def merge(conn: sqlite3.Connection, keep: str, absorbed: str) -> None:
    """Move every identity of ``absorbed`` to ``keep`` and drop ``absorbed`` (the caller re-keys its memory)."""
    conn.execute("UPDATE identities SET person = ? WHERE person = ?", (keep, absorbed))
    erase(conn, absorbed)


def detach(conn: sqlite3.Connection, teacher: str, identity: Identity, now: float) -> tuple[str, str] | None:
    """Give ``identity`` a fresh person: ``(old person, new person)``, or None when it is its person's only one."""
    old = find_person(conn, teacher, identity)
    if old is None:
        return None
    count = conn.execute("SELECT COUNT(*) FROM identities WHERE person = ?", (old,)).fetchone()[0]
    if count < 2:
        return None
    new = _new_person(conn, teacher, now)
    conn.execute(
        "UPDATE identities SET person = ?, since = ? WHERE teacher = ? AND channel = ? AND account = ? AND user = ?",
        (new, now, teacher, identity.channel, identity.account, identity.user),
    )
    return old, new


def erase(conn: sqlite3.Connection, person: str) -> int:
    """Remove the person, their identities, codes and pending requests; returns the rows removed."""
    removed = 0
    for table, column in (("identities", "person"), ("link_codes", "person"), ("forget_requests", "person"), ("persons", "id")):
        removed += conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (person,)).rowcount
    return removed


def request_forget(conn: sqlite3.Connection, person: str, now: float) -> None:
    conn.execute(
        "INSERT INTO forget_requests (person, expires_at) VALUES (?, ?)"
        " ON CONFLICT (person) DO UPDATE SET expires_at = excluded.expires_at",
        (person, now + FORGET_TTL_S),
    )


def take_forget_request(conn: sqlite3.Connection, person: str, now: float) -> bool:
    row = conn.execute("SELECT expires_at FROM forget_requests WHERE person = ?", (person,)).fetchone()
    conn.execute("DELETE FROM forget_requests WHERE person = ?", (person,))
    return row is not None and row[0] >= now
