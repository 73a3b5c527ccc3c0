"""Teachers' files into an engine: extract, cut into passages, store -- once per version of a file.

A document is known by its ``doc_id`` (its file name, lowercased, spaces as
dashes) and the SHA-256 of its bytes.  Adding a file whose name and bytes the
partner already has changes nothing; adding a changed one replaces all of its
passages; a file that cannot be read is reported and the others go on.

Passages follow the text's own structure: paragraphs of one section are
joined while they stay under :data:`MAX_WORDS`; a heading always starts a new
passage; a paragraph longer than that is cut at sentence ends.  So passages
hold up to 400 words of one section (a short section stays one short
passage), and keep the pages they span.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from brain.knowledge.engine import Chunk, Document, IngestError, KnowledgeEngine
from brain.knowledge.extract import Block, Extracted, extract, kind_of

log = logging.getLogger(__name__)

MAX_WORDS = 400
"""Paragraphs of one section join while the passage stays at most this long."""
SPLIT_WORDS = 300
"""A paragraph over MAX_WORDS is cut into pieces of about this many words, at sentence ends."""
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")


def doc_id_for(path: Path) -> str:
    """``Unit 3 Worksheet.pdf`` -> ``unit-3-worksheet.pdf``: what a teacher types to remove it."""
    return re.sub(r"[^\w.]+", "-", path.name.casefold()).strip("-.") or "document"


def _word_count(text: str) -> int:
    return len(text.split())


def _pieces(block: Block) -> list[Block]:
    """The block itself, or -- when it runs over MAX_WORDS -- consecutive pieces of whole sentences."""
    if _word_count(block.text) <= MAX_WORDS:
        return [block]
    sentences: list[str] = []
    for sentence in _SENTENCE_END.split(block.text):
        words = sentence.split()
        while len(words) > MAX_WORDS:  # a "sentence" with no end in sight: cut by words
            sentences.append(" ".join(words[:SPLIT_WORDS]))
            words = words[SPLIT_WORDS:]
        if words:
            sentences.append(" ".join(words))
    pieces: list[list[str]] = [[]]
    for sentence in sentences:
        if pieces[-1] and _word_count(" ".join(pieces[-1] + [sentence])) > SPLIT_WORDS:
            pieces.append([])
        pieces[-1].append(sentence)
    return [replace(block, text=" ".join(piece)) for piece in pieces if piece]


def chunk(extracted: Extracted, doc_id: str) -> list[Chunk]:
    """The document's passages, in reading order."""
    chunks: list[Chunk] = []
    current: list[Block] = []

    def flush() -> None:
        if current:
            pages = [b.page for b in current if b.page is not None]
            chunks.append(Chunk(
                doc_id=doc_id, seq=len(chunks), text="\n\n".join(b.text for b in current), section=current[0].heading,
                page_first=min(pages) if pages else None, page_last=max(pages) if pages else None,
            ))
            current.clear()

    for block in (piece for b in extracted.blocks for piece in _pieces(b)):
        if current and current[0].heading != block.heading:
            flush()
        elif current:
            size = sum(_word_count(b.text) for b in current)
            if size + _word_count(block.text) > MAX_WORDS:
                flush()
        current.append(block)
    flush()
    return chunks


# --------------------------------------------------------------------------- adding files


@dataclass(frozen=True)
class Outcome:
    """What became of one file."""

    path: Path
    status: Literal["added", "replaced", "unchanged", "failed"]
    document: Document | None = None
    error: str = ""


Progress = Callable[[Outcome], None]


def read_document(path: Path, doc_id: str, digest: str, size: int, now: float) -> tuple[Document, list[Chunk]]:
    extracted = extract(path)
    chunks = chunk(extracted, doc_id)
    document = Document(doc_id=doc_id, title=extracted.title, filename=path.name, kind=extracted.kind,
                        sha256=digest, size=size, added_at=now, passages=len(chunks))
    return document, chunks


async def ingest(
    engine: KnowledgeEngine, partner: str, paths: Sequence[Path], *,
    progress: Progress | None = None, clock: Callable[[], float] = time.time,
) -> list[Outcome]:
    """Add each file to the partner's knowledge; ``progress`` hears of each file as it is done.

    A file that cannot be read is an outcome with its error, and the next file
    goes on; an engine failure (:class:`EngineError`) stops the whole run.
    """
    known = {d.doc_id: d for d in await engine.documents(partner)}
    seen: dict[str, Path] = {}
    outcomes: list[Outcome] = []
    for path in paths:
        outcome = await _one(engine, partner, Path(path), known, seen, clock())
        outcomes.append(outcome)
        if outcome.document is not None:
            known[outcome.document.doc_id] = outcome.document
        log.info("knowledge file partner=%s file=%s status=%s passages=%s%s", partner, path, outcome.status,
                 outcome.document.passages if outcome.document else 0, f" error={outcome.error}" if outcome.error else "")
        if progress is not None:
            progress(outcome)
    return outcomes


async def _one(engine: KnowledgeEngine, partner: str, path: Path, known: dict[str, Document],
               seen: dict[str, Path], now: float) -> Outcome:
    doc_id = doc_id_for(path)
    try:
        kind_of(path)
        if doc_id in seen:
            raise IngestError(f"{path.name}: {seen[doc_id]} in this same run has the same name",
                              fix="rename one of them; documents are known by their file name")
        seen[doc_id] = path
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except (FileNotFoundError, IsADirectoryError):
            raise IngestError(f"{path}: no such file") from None
        except PermissionError:
            raise IngestError(f"{path}: not allowed to read it", fix="check the file's permissions") from None
        digest = hashlib.sha256(data).hexdigest()
        earlier = known.get(doc_id)
        if earlier is not None and earlier.sha256 == digest:
            return Outcome(path, "unchanged", earlier)
        document, chunks = await asyncio.to_thread(read_document, path, doc_id, digest, len(data), now)
    except IngestError as error:
        return Outcome(path, "failed", error=str(error))
    await engine.add(partner, document, chunks)
    return Outcome(path, "replaced" if earlier is not None else "added", document)
