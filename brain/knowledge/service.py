"""``knowledge_search`` over a partner's own documents and its persona's notes, with citations.

:class:`KnowledgeService` is the :class:`~brain.tools.builtin.knowledge.KnowledgeSearch`
the brain is handed.  For each partner it opens the engine its
``knowledge.yaml`` names (reopening it when that file changes) and asks it and
the notes for passages; the two lists are interleaved, documents first, since
their scores do not compare (bm25 of two indexes, or cosine against bm25).
Every passage carries the citation a reply can show: ``worksheet.pdf p. 3``,
``study-buddy/notes/photosynthesis.md``.

A knowledge base that cannot be searched -- a broken ``knowledge.yaml``, an
embedding endpoint down -- costs the turn its documents, not the answer: the
problem is logged and the notes still answer.

The same service is what ``partners kb`` drives: add files, list, remove.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

from brain.knowledge.engine import Chunk, Document, Hit, KnowledgeEngine, KnowledgeError
from brain.knowledge.ingest import Outcome, Progress, ingest
from brain.knowledge.settings import (
    SETTINGS_FILE,
    KnowledgeSettings,
    folder_of,
    load_settings,
    open_engine,
    parse_settings,
    save_settings,
)
from brain.notes import NotesIndex
from brain.tools.services import Passage
from gateway.core.config import Config, ModelSettings
from gateway.core.errors import ConfigError
from personas.loader import Persona, load_persona, persona_dirs

log = logging.getLogger(__name__)

KNOWLEDGE_DIR = "knowledge"


def passage_of(hit: Hit) -> Passage:
    return Passage(title=hit.title, text=hit.chunk.text, source=hit.citation)


def interleave(first: Sequence[Passage], second: Sequence[Passage], limit: int) -> list[Passage]:
    """``a1, b1, a2, b2, ...``, at most ``limit``."""
    merged = [p for pair in zip_longest(first, second) for p in pair if p is not None]
    return merged[:limit]


@dataclass
class KnowledgeBase:
    """One partner's open knowledge base."""

    partner: str
    folder: Path
    settings: KnowledgeSettings
    engine: KnowledgeEngine
    stamp: tuple[int, int] | None
    """``knowledge.yaml``'s (mtime, size) when it was read; None when there was no file."""


class KnowledgeService:
    """Partners' documents (one engine each) and their personas' notes, searched together."""

    def __init__(self, root: Path, *, notes: NotesIndex | None = None,
                 persona_of: Callable[[str], Persona] | None = None,
                 model_for: Callable[[str], ModelSettings | None] = lambda _partner: None) -> None:
        self.root = root
        self.notes = notes
        self.persona_of = persona_of
        """The partner's persona, whose notes ``notes`` indexes."""
        self.model_for = model_for
        """The partner's own model (its config's, else its persona's): what LightRAG builds its graph with."""
        self._bases: dict[str, KnowledgeBase] = {}
        self._lock = asyncio.Lock()

    @classmethod
    def from_config(cls, config: Config, *, notes: NotesIndex | None = None) -> KnowledgeService:
        """Knowledge under ``<data_dir>/knowledge/``; personas and models found as the brain finds them."""
        service = cls(config.data_dir / KNOWLEDGE_DIR, notes=notes)
        service.follow(config)
        return service

    def follow(self, config: Config) -> None:
        """Find partners' personas and models in ``config`` from now on: the gateway calls this when a console
        edit changes the partners (``Gateway.apply``, ADR 0039), so a partner created there has its knowledge."""
        search = persona_dirs(config)

        def persona_of(partner_id: str) -> Persona:
            return load_persona(config.partner(partner_id).persona, search, secrets=config.secrets)

        def model_for(partner_id: str) -> ModelSettings | None:
            return config.partner(partner_id).model or persona_of(partner_id).model

        self.persona_of, self.model_for = persona_of, model_for

    def folder(self, partner: str) -> Path:
        return folder_of(self.root, partner)

    def _stamp(self, partner: str) -> tuple[int, int] | None:
        try:
            stat = (self.folder(partner) / SETTINGS_FILE).stat()
        except FileNotFoundError:
            return None
        return stat.st_mtime_ns, stat.st_size

    async def base(self, partner: str) -> KnowledgeBase:
        """The partner's knowledge base, opened with the engine its ``knowledge.yaml`` names now."""
        async with self._lock:
            stamp = self._stamp(partner)
            base = self._bases.get(partner)
            if base is not None and base.stamp == stamp:
                return base
            if base is not None:
                del self._bases[partner]
                await base.engine.close()
            folder = self.folder(partner)
            settings = load_settings(folder)
            model = self.model_for(partner) if settings.engine == "lightrag" and settings.model is None else None
            base = KnowledgeBase(partner, folder, settings, open_engine(folder, settings, model), stamp)
            self._bases[partner] = base
            return base

    # ----------------------------------------------------------------------- the tool's side

    async def search(self, partner_id: str, query: str, limit: int) -> list[Passage]:
        documents = [passage_of(hit) for hit in await self.search_documents(partner_id, query, limit)]
        return interleave(documents, await self.search_notes(partner_id, query, limit), limit)

    async def search_notes(self, partner: str, query: str, limit: int) -> list[Passage]:
        """The persona's notes, cited by the note's path in the persona folder."""
        if self.notes is None or self.persona_of is None:
            return []
        try:
            persona = self.persona_of(partner)
        except ConfigError as error:
            log.warning("notes search failed partner=%s error=%s", partner, error)
            return []
        found = await asyncio.to_thread(self.notes.search, persona, query, limit)
        return [
            Passage(title=f"{p.title} — {p.heading}" if p.heading else p.title, text=p.text, source=f"{persona.id}/{p.path}")
            for p in found
        ]

    async def search_documents(self, partner: str, query: str, limit: int) -> list[Hit]:
        """The partner's documents only; a knowledge base that fails is logged and counts as empty."""
        if not (self.folder(partner)).is_dir():
            return []
        try:
            base = await self.base(partner)
            return await base.engine.search(partner, query, limit)
        except (KnowledgeError, ConfigError) as error:
            log.warning("knowledge search failed partner=%s error=%s", partner, error)
            return []

    # ----------------------------------------------------------------------- the teacher's side

    async def configure(self, partner: str, raw: dict[str, Any]) -> KnowledgeSettings:
        """Write the partner's ``knowledge.yaml``; refused while documents are stored under another engine."""
        folder = self.folder(partner)
        wanted = parse_settings(raw, str(folder / SETTINGS_FILE))
        current = await self.base(partner)
        if _index_of(wanted) != _index_of(current.settings):
            stored = await current.engine.documents(partner)
            if stored:
                raise KnowledgeError(
                    f"partner {partner}'s {len(stored)} document(s) are indexed by the {_describe(current.settings)}",
                    fix=f"remove them first (`partners kb rm {partner} DOC_ID`, see `partners kb list {partner}`), "
                        "then add them again with the new engine",
                )
        settings = save_settings(folder, raw)
        await self.base(partner)  # reopen with what the file says now
        return settings

    async def add(self, partner: str, paths: Sequence[Path], *, progress: Progress | None = None) -> list[Outcome]:
        base = await self.base(partner)
        return await ingest(base.engine, partner, paths, progress=progress)

    async def documents(self, partner: str) -> list[Document]:
        if not self.folder(partner).is_dir():
            return []
        return await (await self.base(partner)).engine.documents(partner)

    async def document(self, partner: str, doc_id: str) -> tuple[Document, list[Chunk]] | None:
        """A document and its passages, as the engine stores them; None for one the partner does not have."""
        found = next((d for d in await self.documents(partner) if d.doc_id == doc_id), None)
        if found is None:
            return None
        return found, await (await self.base(partner)).engine.passages(partner, doc_id)

    async def remove(self, partner: str, doc_id: str) -> bool:
        if not self.folder(partner).is_dir():
            return False
        return await (await self.base(partner)).engine.remove(partner, doc_id)

    async def close(self) -> None:
        async with self._lock:
            bases, self._bases = list(self._bases.values()), {}
        for base in bases:
            await base.engine.close()


def _index_of(settings: KnowledgeSettings) -> tuple[str, str | None, int | None]:
    """What the stored index depends on: the engine and, for lightrag, the embedding model and its size."""
    embedding = settings.embedding if settings.engine == "lightrag" else None
    return settings.engine, embedding.model if embedding else None, embedding.dimensions if embedding else None


def _describe(settings: KnowledgeSettings) -> str:
    if settings.engine == "lightrag" and settings.embedding is not None:
        return f"lightrag engine with embedding model {settings.embedding.model}"
    return f"{settings.engine} engine"
