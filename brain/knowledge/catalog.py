"""The record of a knowledge base: its documents and their passages, in one SQLite file.

Both engines keep one -- ``fts`` searches it directly (its FTS5 index is kept
in step by triggers), ``lightrag`` maps what LightRAG finds back to it for the
title, section and pages a citation needs.  A document and its passages are
written and replaced in one transaction.  Calls block; engines run them in a
thread.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from brain.knowledge.engine import Chunk, Document, EngineError
from gateway.store.schema import Schema, StoreError, describe, migrate, open_database

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    partner TEXT NOT NULL, doc_id TEXT NOT NULL, title TEXT NOT NULL, filename TEXT NOT NULL, kind TEXT NOT NULL,
    sha256 TEXT NOT NULL, size INTEGER NOT NULL, added_at REAL NOT NULL, passages INTEGER NOT NULL,
    PRIMARY KEY (partner, doc_id));
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY, partner TEXT NOT NULL, doc_id TEXT NOT NULL, seq INTEGER NOT NULL,
    title TEXT NOT NULL, section TEXT NOT NULL, page_first INTEGER, page_last INTEGER, text TEXT NOT NULL,
    UNIQUE (partner, doc_id, seq));
"""
CATALOG_SCHEMA = Schema("knowledge catalog", (_SCHEMA,), fix="remove the partner's knowledge folder and add its files again")
"""Version 1 is also ``PRAGMA user_version`` 1, which earlier releases wrote."""
DOCUMENT_COLUMNS = "d.doc_id, d.title, d.filename, d.kind, d.sha256, d.size, d.added_at, d.passages"
CHUNK_COLUMNS = "c.doc_id, c.seq, c.text, c.section, c.page_first, c.page_last"


def document_from(row: Sequence[Any]) -> Document:
    return Document(*row[:8])


def chunk_from(row: Sequence[Any]) -> Chunk:
    return Chunk(*row[:6])


class Catalog:
    """Documents and passages of any number of partners."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # The default isolation level, unlike the other stores: ``with self._db:`` below is a transaction.
            self._db = open_database(path, (CATALOG_SCHEMA,), pragmas=(), isolation_level="DEFERRED")
        except StoreError as error:
            raise EngineError(f"{error.path} {error.problem}", fix=error.fix) from None
        self._data_version = self._version()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def migrate(self, schema: Schema) -> None:
        """Bring an engine's own schema (its tables, triggers, an index rebuild) up to date, atomically."""
        with self._lock:
            try:
                migrate(self._db, schema, self.path)
            except StoreError as error:
                raise EngineError(f"{error.path} {error.problem}", fix=error.fix) from None
            except sqlite3.Error as error:
                described = describe(self.path, error, schema)
                raise EngineError(f"{described.path} {described.problem}", fix=described.fix) from None

    def _version(self) -> int:
        return self._db.execute("PRAGMA data_version").fetchone()[0]

    def changed_elsewhere(self) -> bool:
        """True once after another process (``partners kb add`` beside a running gateway) wrote the file."""
        with self._lock:
            version = self._version()
            changed, self._data_version = version != self._data_version, version
        return changed

    def put(self, partner: str, document: Document, chunks: Iterable[Chunk]) -> None:
        """Store the document and its passages in place of any earlier version."""
        with self._lock, self._db:
            self._delete(partner, document.doc_id)
            self._db.execute("INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", (
                partner, document.doc_id, document.title, document.filename, document.kind, document.sha256,
                document.size, document.added_at, document.passages))
            self._db.executemany(
                "INSERT INTO chunks (partner, doc_id, seq, title, section, page_first, page_last, text) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(partner, c.doc_id, c.seq, document.title, c.section, c.page_first, c.page_last, c.text) for c in chunks],
            )

    def delete(self, partner: str, doc_id: str) -> bool:
        with self._lock, self._db:
            return self._delete(partner, doc_id)

    def _delete(self, partner: str, doc_id: str) -> bool:
        self._db.execute("DELETE FROM chunks WHERE partner = ? AND doc_id = ?", (partner, doc_id))
        return self._db.execute("DELETE FROM documents WHERE partner = ? AND doc_id = ?", (partner, doc_id)).rowcount > 0

    def document(self, partner: str, doc_id: str) -> Document | None:
        rows = self.read(f"SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.partner = ? AND d.doc_id = ?", (partner, doc_id))
        return document_from(rows[0]) if rows else None

    def documents(self, partner: str) -> list[Document]:
        rows = self.read(f"SELECT {DOCUMENT_COLUMNS} FROM documents d WHERE d.partner = ? "
                         "ORDER BY d.title COLLATE NOCASE, d.doc_id", (partner,))
        return [document_from(row) for row in rows]

    def chunks(self, partner: str, doc_id: str) -> list[Chunk]:
        """One document's passages in reading order (what a teacher reads back to check a file was understood)."""
        rows = self.read(f"SELECT {CHUNK_COLUMNS} FROM chunks c WHERE c.partner = ? AND c.doc_id = ? ORDER BY c.seq",
                         (partner, doc_id))
        return [chunk_from(row) for row in rows]

    def chunk_ids(self, partner: str, doc_id: str) -> list[str]:
        rows = self.read("SELECT doc_id, seq FROM chunks WHERE partner = ? AND doc_id = ? ORDER BY seq", (partner, doc_id))
        return [Chunk(doc_id=d, seq=s, text="").chunk_id for d, s in rows]

    def passages(self, partner: str, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], tuple[Document, Chunk]]:
        """The documents and passages with these (doc_id, seq) keys; unknown keys are left out."""
        found: dict[tuple[str, int], tuple[Document, Chunk]] = {}
        for doc_id, seq in keys:
            rows = self.read(
                f"SELECT {DOCUMENT_COLUMNS}, {CHUNK_COLUMNS} FROM chunks c JOIN documents d "
                "ON d.partner = c.partner AND d.doc_id = c.doc_id WHERE c.partner = ? AND c.doc_id = ? AND c.seq = ?",
                (partner, doc_id, seq),
            )
            if rows:
                found[(doc_id, seq)] = (document_from(rows[0]), chunk_from(rows[0][8:]))
        return found

    def read(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, parameters).fetchall()
