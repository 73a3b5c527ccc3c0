"""The knowledge engine seam: documents and their passages in, ranked passages out.

An engine stores each partner's documents and passages and searches them; it
never reads files (that is :mod:`brain.knowledge.ingest`) and never sees the
persona's notes (that is :mod:`brain.knowledge.service`).  Errors::

    GatewayError
    └── KnowledgeError           something about a partner's knowledge base
        ├── IngestError          a file we cannot read: unsupported type, encrypted or corrupt, no text
        └── EngineError          the engine failed: its model or embedding endpoint, its storage
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gateway.core.errors import GatewayError


class KnowledgeError(GatewayError):
    """A problem with a partner's knowledge base, said so a teacher can act on it."""

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        self.message, self.fix = message, fix
        super().__init__(f"{message} (fix: {fix})" if fix else message)


class IngestError(KnowledgeError):
    """A file that cannot become passages; the message names the file."""


class EngineError(KnowledgeError):
    """The engine could not store or search (an endpoint down, a model refusing, storage broken)."""


@dataclass(frozen=True)
class Document:
    """One ingested file of one partner."""

    doc_id: str
    """Short and stable: the file's name, lowercased, spaces as dashes (``unit-3-worksheet.pdf``)."""
    title: str
    filename: str
    kind: str
    """``markdown``, ``text``, ``pdf``, ``docx`` or ``html``."""
    sha256: str
    """Of the file's bytes: the same file added again is a no-op."""
    size: int
    added_at: float
    passages: int = 0


@dataclass(frozen=True)
class Chunk:
    """One passage of a document: a few hundred words of one section, with the pages it spans."""

    doc_id: str
    seq: int
    text: str
    section: str = ""
    page_first: int | None = None
    page_last: int | None = None

    @property
    def chunk_id(self) -> str:
        return f"{self.doc_id}#{self.seq}"

    @property
    def pages(self) -> str:
        """``p. 3``, ``pp. 3–4``, or empty for files without pages."""
        if self.page_first is None:
            return ""
        if self.page_last is None or self.page_last == self.page_first:
            return f"p. {self.page_first}"
        return f"pp. {self.page_first}–{self.page_last}"


@dataclass(frozen=True)
class Hit:
    """A passage an engine found, with its document; ``score`` orders hits of one engine only (higher is better)."""

    document: Document
    chunk: Chunk
    score: float

    @property
    def title(self) -> str:
        return f"{self.document.title} — {self.chunk.section}" if self.chunk.section else self.document.title

    @property
    def citation(self) -> str:
        """Where a learner finds it: ``worksheet.pdf p. 3``, ``photosynthesis.md``."""
        return " ".join(part for part in (self.document.filename, self.chunk.pages) if part)


class KnowledgeEngine(Protocol):
    """Stores and searches the passages of each partner's documents."""

    name: str

    async def add(self, partner: str, document: Document, chunks: list[Chunk]) -> None:
        """Store a document and its passages, replacing any earlier version with the same ``doc_id``."""
        ...

    async def remove(self, partner: str, doc_id: str) -> bool:
        """Forget a document and its passages; False if there was none."""
        ...

    async def search(self, partner: str, query: str, limit: int) -> list[Hit]:
        """The passages that answer ``query`` best, best first."""
        ...

    async def documents(self, partner: str) -> list[Document]:
        """Every document of the partner, by title."""
        ...

    async def passages(self, partner: str, doc_id: str) -> list[Chunk]:
        """One document's passages in reading order; empty for a document it does not have."""
        ...

    async def close(self) -> None:
        ...
