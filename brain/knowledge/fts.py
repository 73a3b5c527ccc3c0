"""The ``fts`` engine, the embedded default: SQLite FTS5 with bm25 over the catalog's passages.

Nothing to install or configure and nothing leaves the machine.  Words match
by their stem (``porter``), accents aside; the learner's text reaches FTS5
only as quoted words (:func:`brain.knowledge.query.fts_query`, the same query builder
the notes use), so no input is FTS5 syntax.  A section heading counts double,
a document's title one and a half.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from brain.knowledge.catalog import (
    CATALOG_SCHEMA,
    CHUNK_COLUMNS,
    DOCUMENT_COLUMNS,
    Catalog,
    chunk_from,
    document_from,
)
from brain.knowledge.engine import Chunk, Document, Hit
from brain.knowledge.query import fts_query
from gateway.store.schema import Schema

FTS_SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(
    title, section, text, content = 'chunks', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, title, section, text) VALUES (new.id, new.title, new.section, new.text);
END;
CREATE TRIGGER IF NOT EXISTS chunks_fts_delete AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts (chunks_fts, rowid, title, section, text) VALUES ('delete', old.id, old.title, old.section, old.text);
END;
INSERT INTO chunks_fts (chunks_fts) VALUES ('rebuild');
"""
FTS_INDEX = Schema("knowledge index", (FTS_SCHEMA,), fix=CATALOG_SCHEMA.fix, owns_file=False)
"""Beside the catalog's own schema in ``catalog.db``."""
WEIGHTS = (1.5, 2.0, 1.0)
"""bm25 weights of title, section and text."""


class FtsEngine:
    """Passages of every partner in one catalog file, searched with FTS5."""

    name = "fts"

    def __init__(self, path: Path) -> None:
        self.catalog = Catalog(path)
        self.catalog.migrate(FTS_INDEX)  # the rebuild indexes passages another engine stored before

    async def add(self, partner: str, document: Document, chunks: list[Chunk]) -> None:
        await asyncio.to_thread(self.catalog.put, partner, document, chunks)

    async def remove(self, partner: str, doc_id: str) -> bool:
        return await asyncio.to_thread(self.catalog.delete, partner, doc_id)

    async def documents(self, partner: str) -> list[Document]:
        return await asyncio.to_thread(self.catalog.documents, partner)

    async def passages(self, partner: str, doc_id: str) -> list[Chunk]:
        return await asyncio.to_thread(self.catalog.chunks, partner, doc_id)

    async def search(self, partner: str, query: str, limit: int) -> list[Hit]:
        match = fts_query(query)
        if match is None:
            return []
        rows = await asyncio.to_thread(
            self.catalog.read,
            f"SELECT {DOCUMENT_COLUMNS}, {CHUNK_COLUMNS}, bm25(chunks_fts, ?, ?, ?) AS score "
            "FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid "
            "JOIN documents d ON d.partner = c.partner AND d.doc_id = c.doc_id "
            "WHERE chunks_fts MATCH ? AND c.partner = ? ORDER BY score LIMIT ?",
            (*WEIGHTS, match, partner, limit),
        )
        return [Hit(document_from(row), chunk_from(row[8:]), -row[-1]) for row in rows]  # bm25: lower is better

    async def close(self) -> None:
        self.catalog.close()
