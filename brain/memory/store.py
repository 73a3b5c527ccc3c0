"""``memory.db``: one SQLite file for people and every memory layer, one connection, one lock.

The same pattern as the session log (``brain.session_log``): operations are
short plain functions of the connection, run on a worker thread under the
lock, each in its own transaction -- so a merge of two people, which touches
identities and three memory tables, happens entirely or not at all.

The schema, in one place:

- ``persons``: a learner (or a teacher) as a person, inside one teacher scope;
- ``identities``: (teacher, channel, account, user) -> person;
- ``link_codes``: short-lived codes for ``/link``; ``forget_requests``: a pending ``/forget``;
- ``trace``: append-only observed facts per scope, each with its provenance;
- ``preferences``: what the idempotent preference gate let in, per scope;
- ``documents``: consolidated Markdown per scope, its footnote -> trace id map and
  the trace ids it covers (partner notes are documents without a trace).

A scope is three columns everywhere: ``scope_kind``, ``teacher``, ``scope_key``
(see :mod:`brain.memory.scopes`).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import TypeVar

from brain.sqlite_file import SqliteFile
from gateway.store.schema import Schema

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS persons (
    id TEXT PRIMARY KEY, teacher TEXT NOT NULL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS identities (
    teacher TEXT NOT NULL, channel TEXT NOT NULL, account TEXT NOT NULL, user TEXT NOT NULL,
    person TEXT NOT NULL, display_name TEXT NOT NULL DEFAULT '', since REAL NOT NULL,
    PRIMARY KEY (teacher, channel, account, user));
CREATE INDEX IF NOT EXISTS identities_by_person ON identities (person);
CREATE TABLE IF NOT EXISTS link_codes (
    code TEXT PRIMARY KEY, teacher TEXT NOT NULL, person TEXT NOT NULL, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS forget_requests (
    person TEXT PRIMARY KEY, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS trace (
    id INTEGER PRIMARY KEY, scope_kind TEXT NOT NULL, teacher TEXT NOT NULL, scope_key TEXT NOT NULL,
    text TEXT NOT NULL, topic TEXT, norm TEXT NOT NULL,
    partner TEXT NOT NULL, conversation TEXT NOT NULL, event_id TEXT NOT NULL, speaker TEXT NOT NULL,
    at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS trace_by_scope ON trace (scope_kind, teacher, scope_key, id);
CREATE INDEX IF NOT EXISTS trace_by_speaker ON trace (speaker);
CREATE TABLE IF NOT EXISTS preferences (
    id INTEGER PRIMARY KEY, scope_kind TEXT NOT NULL, teacher TEXT NOT NULL, scope_key TEXT NOT NULL,
    text TEXT NOT NULL, topic TEXT, norm TEXT NOT NULL,
    partner TEXT NOT NULL, conversation TEXT NOT NULL, event_id TEXT NOT NULL, speaker TEXT NOT NULL,
    at REAL NOT NULL,
    UNIQUE (scope_kind, teacher, scope_key, norm));
CREATE INDEX IF NOT EXISTS preferences_by_speaker ON preferences (speaker);
CREATE TABLE IF NOT EXISTS documents (
    scope_kind TEXT NOT NULL, teacher TEXT NOT NULL, scope_key TEXT NOT NULL,
    markdown TEXT NOT NULL, footnotes TEXT NOT NULL, covered TEXT NOT NULL,
    author TEXT NOT NULL, updated_at REAL NOT NULL,
    PRIMARY KEY (scope_kind, teacher, scope_key));
"""


class MemoryStore(SqliteFile):
    """The connection to ``memory.db``; ``run`` executes one operation as one transaction."""

    schema = Schema("memory store", (SCHEMA,))

    def run_sync(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = operation(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

    async def run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        return await asyncio.to_thread(self.run_sync, operation)

