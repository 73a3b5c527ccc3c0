"""The offline responder: answers from a partner's documents and its persona's notes when no model can.

It is honest about what it is -- every answer starts with one short sentence
saying no model is configured (or that the model is in trouble) -- and still
useful: it searches the persona's notes (its ``knowledge`` sources) with SQLite
FTS5 and the partner's own knowledge base (``partners kb``), ranks the passages
together so the one that *defines* the asked term comes first
(:mod:`brain.knowledge.rank`), and quotes the best, each under its title; or it
lists the topics it has notes on.  How to set a model is said to the teacher
(the log, ``partners doctor``), never to the learner.

The index holds one row per paragraph-level passage.  It is built once per
persona folder, in memory or in a cache database under the data dir, and
rebuilt when a note file is added, removed or changed.  The learner's text
never reaches FTS5 as syntax: it is reduced to quoted words, so quotes, ``*``,
``NEAR``, ``AND`` or unbalanced parentheses are just text.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

from brain.knowledge.engine import Hit
from brain.knowledge.query import MAX_QUERY_WORDS, fts_query, query_words  # noqa: F401 - re-exported
from brain.knowledge.rank import RELEVANCE_RATIO, Candidate, definition_at, rank, subject_of
from gateway.core.config import Config, ModelSettings, PartnerConfig
from gateway.core.errors import ConfigError
from gateway.core.events import Progress, RuntimeEvent, StreamDelta, StreamEnd, TurnEnd
from gateway.core.phrases import ENGLISH, Phrase, language_for, say
from gateway.core.turns import Turn
from gateway.store.schema import Schema, StoreError, open_database
from personas.files import NOTE_SUFFIXES  # noqa: F401 - re-exported
from personas.files import note_files as persona_note_files
from personas.loader import Persona, load_persona, persona_dirs

log = logging.getLogger(__name__)

NOTES_INDEX = Schema("notes index", ("""
    DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS notes; DROP TABLE IF EXISTS passages;
    CREATE TABLE files (folder TEXT, path TEXT, mtime_ns INTEGER, size INTEGER, PRIMARY KEY (folder, path));
    CREATE TABLE notes (folder TEXT, path TEXT, title TEXT, PRIMARY KEY (folder, path));
    CREATE VIRTUAL TABLE passages USING fts5(
        title, heading, body, folder UNINDEXED, path UNINDEXED,
        tokenize = 'porter unicode61 remove_diacritics 2');
""",), fix="delete the file; it is rebuilt from the notes")
"""A cache of the notes, rebuilt on demand: a file it cannot use is deleted and made again."""
MAX_PASSAGES = 3
CANDIDATES = 8
"""Passages each search hands the offline ranking, which quotes the best MAX_PASSAGES of them all."""
KB_SEARCH_TIMEOUT_S = 10.0
"""An offline answer waits this long for the partner's knowledge base (lightrag may call a model), then goes without."""
EXCERPT_CHARS = 420
SHORT_SECTION_CHARS = 300
"""Consecutive paragraphs of one section are one passage while together they stay this short."""

_reported: set[str] = set()
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s")


# --------------------------------------------------------------------------- notes into passages


@dataclass(frozen=True)
class Passage:
    path: str  # relative to the persona folder
    title: str  # the note's title: its first level-1 heading, else its file name
    heading: str  # the section the passage sits under ("" before the first section)
    text: str


def note_files(persona: Persona) -> list[tuple[str, Path]]:
    """Every note file of the persona's knowledge sources, as (path relative to the folder, path).

    A note that leads outside the persona folder, or is over its size cap, is left out with a
    warning (``partners doctor`` and loading the persona refuse it; this covers one added later)."""
    found = persona_note_files(persona.folder, persona.knowledge_paths())
    for problem in found.refused:
        if str(problem) not in _reported:  # once per process: the index refreshes on every search
            _reported.add(str(problem))
            log.warning("note left out persona=%s: %s", persona.id, problem)
    return found.files


def _title_from_name(path: Path) -> str:
    return path.stem.replace("-", " ").replace("_", " ").strip().capitalize() or path.name


def _without_front_matter(lines: list[str]) -> list[str]:
    if lines and lines[0].strip() == "---":
        for index, line in enumerate(lines[1:], start=1):
            if line.strip() in ("---", "..."):
                return lines[index + 1:]
    return lines


def _unwrap(block: list[str]) -> str:
    """Join soft-wrapped lines, keeping list items on lines of their own (code blocks stay as written)."""
    if any(_FENCE.match(line) for line in block):
        return "\n".join(block)
    lines: list[str] = []
    for line in block:
        if lines and not _ITEM.match(line):
            lines[-1] += " " + line.strip()
        else:
            lines.append(line.strip())
    return "\n".join(lines)


def read_note(path: Path, rel: str) -> tuple[str, list[Passage]]:
    """A note's title and its passages: paragraphs and lists, in order.

    A lead-in ending in ':' stays with what follows, and short paragraphs of one
    section are kept together, so a passage reads on its own.
    """
    lines = _without_front_matter(path.read_text(encoding="utf-8", errors="replace").splitlines())
    title, heading, fenced = "", "", False
    blocks: list[tuple[str, list[str]]] = []
    current: list[str] = []
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (match := _HEADING.match(line)):
            if current:
                blocks.append((heading, current))
            current = []
            if len(match.group(1)) == 1 and not title:
                title = match.group(2)
            else:
                heading = match.group(2)
            continue
        elif not fenced and not line.strip():
            if current:
                blocks.append((heading, current))
            current = []
            continue
        current.append(line.rstrip())
    if current:
        blocks.append((heading, current))
    title = title or _title_from_name(path)
    passages: list[Passage] = []
    for section, block in blocks:
        text = _unwrap(block).strip()
        previous = passages[-1] if passages else None
        if previous and previous.heading == section and (
            previous.text.endswith(":") or len(previous.text) + len(text) <= SHORT_SECTION_CHARS
        ):
            passages[-1] = Passage(rel, title, section, previous.text + "\n\n" + text)
        elif text:
            passages.append(Passage(rel, title, section, text))
    return title, passages


# --------------------------------------------------------------------------- the index


class NotesIndex:
    """An FTS5 index of passages for any number of persona folders, in memory or in one cache file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = self._open()
        except StoreError as error:  # a cache: rebuilt from the notes rather than repaired
            if path is None:
                raise
            log.warning("notes index unusable, rebuilding path=%s problem=%s", path, error.problem)
            for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                stale.unlink(missing_ok=True)
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        # The default isolation level: ``with self._db:`` makes each refresh one transaction.
        return open_database(self.path or Path(":memory:"), (NOTES_INDEX,), pragmas=(), isolation_level="DEFERRED")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def refresh(self, persona: Persona) -> bool:
        """Rebuild the persona's passages if any note was added, removed or changed; True if it did."""
        folder = str(persona.folder)
        files, stamps = [], []
        for rel, path in note_files(persona):
            try:
                stat = path.stat()
            except FileNotFoundError:  # removed while we looked
                continue
            files.append((rel, path))
            stamps.append((rel, stat.st_mtime_ns, stat.st_size))
        with self._lock:
            known = self._db.execute(
                "SELECT path, mtime_ns, size FROM files WHERE folder = ? ORDER BY path", (folder,)
            ).fetchall()
            if known == stamps:
                return False
            notes = [(rel, *read_note(path, rel)) for rel, path in files]
            with self._db:
                for table in ("files", "notes", "passages"):
                    self._db.execute(f"DELETE FROM {table} WHERE folder = ?", (folder,))
                self._db.executemany("INSERT INTO files VALUES (?, ?, ?, ?)", [(folder, *s) for s in stamps])
                self._db.executemany("INSERT INTO notes VALUES (?, ?, ?)", [(folder, rel, title) for rel, title, _ in notes])
                self._db.executemany(
                    "INSERT INTO passages (title, heading, body, folder, path) VALUES (?, ?, ?, ?, ?)",
                    [(p.title, p.heading, p.text, folder, p.path) for _, _, passages in notes for p in passages],
                )
        log.info("notes index built persona=%s notes=%d passages=%d", persona.id, len(notes),
                 sum(len(passages) for _, _, passages in notes))
        return True

    def search(self, persona: Persona, text: str, limit: int = MAX_PASSAGES) -> list[Passage]:
        """The passages that match the learner's text best (bm25, a section heading counting double).

        Weak matches -- scoring under RELEVANCE_RATIO of the best -- are left out,
        so a stray common word does not drag in an unrelated note.
        """
        return [p for p, relevance in self.scored(persona, text, limit) if relevance >= RELEVANCE_RATIO]

    def scored(self, persona: Persona, text: str, limit: int) -> list[tuple[Passage, float]]:
        """The ``limit`` best passages by bm25, each with its score as a fraction of the best one's."""
        self.refresh(persona)
        query = fts_query(text)
        if query is None:
            return []
        with self._lock:
            rows = self._db.execute(
                "SELECT path, title, heading, body, bm25(passages, 1.0, 2.0, 1.0) AS score FROM passages "
                "WHERE passages MATCH ? AND folder = ? ORDER BY score LIMIT ?",
                (query, str(persona.folder), limit),
            ).fetchall()
        best = rows[0][4] if rows else 0.0  # bm25 is negative: lower is better
        return [(Passage(*row[:4]), row[4] / best if best else 1.0) for row in rows]

    def topics(self, persona: Persona) -> list[str]:
        self.refresh(persona)
        with self._lock:
            rows = self._db.execute(
                "SELECT title FROM notes WHERE folder = ? ORDER BY title COLLATE NOCASE", (str(persona.folder),)
            ).fetchall()
        return [title for (title,) in rows]


# --------------------------------------------------------------------------- answers


def model_status(persona: Persona, partner: PartnerConfig | None = None) -> tuple[str, str]:
    """What ``partners doctor`` says about a model: (message, fix); an empty fix means all is well.

    With ``partner``, its own ``model:`` (which overrides the persona's) is taken into account.
    """
    if partner is not None and partner.model is not None:
        return f"partner {partner.id} uses {_describe(partner.model)} (set in the partner's config)", ""
    if persona.model is not None:
        return f"persona {persona.id} uses {_describe(persona.model)}", ""
    who = f"partner {partner.id} (persona {persona.id})" if partner is not None else f"persona {persona.id}"
    return (
        f"{who} has no language model configured: it answers by quoting its knowledge base and study notes",
        f"set `model:` in {persona.folder / 'persona.yaml'} (e.g. `model: openai/gpt-4o-mini` or "
        "`model: ollama/llama3`) or in the partner's config, then restart the gateway",
    )


def _describe(settings: ModelSettings) -> str:
    return settings.model + (f" (backup {settings.backup.model})" if settings.backup else "")


def _clip(text: str, limit: int) -> str:
    """Cut at the last sentence end before ``limit`` (else the last space) and mark the cut."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    end = max(cut.rfind(". "), cut.rfind("! "), cut.rfind("? "), cut.rfind(".\n"))
    if end > limit // 2:
        return cut[:end + 1] + " …"
    space = cut.rfind(" ")
    return (cut[:space] if space > 0 else cut) + " …"


def _mentions(line: str, words: Sequence[str]) -> bool:
    low = line.casefold()
    return any(word[:5] in low for word in words)  # a 5-letter stem: "stormed" finds "storm"


def excerpt(text: str, words: Sequence[str] = (), limit: int = EXCERPT_CHARS) -> str:
    """A short excerpt of a passage: whole sentences of a paragraph; of a list, the lines that mention the words."""
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    if len(lines) == 1:
        return _clip(text, limit)
    wanted = [i for i, line in enumerate(lines) if line and _mentions(line, words)] or range(len(lines))
    kept: list[str] = []
    size, last = 0, -1
    for i in wanted:
        if kept and size + len(lines[i]) > limit:
            break
        if i > last + 1:
            kept.append("…")
        kept.append(_clip(lines[i], limit))
        size, last = size + len(lines[i]) + 1, i
    if last < len(lines) - 1:
        kept.append("…")
    return "\n".join(kept)


class OfflineReason(str, Enum):
    """Why a turn is answered from the notes rather than by the model: it decides the one-line notice."""

    NO_MODEL = "no model"
    """The partner has no model configured."""
    MODEL_TROUBLE = "model trouble"
    """A model is configured but failed (down, hanging, refusing) after its retry and its backup."""


NO_MODEL_NOTICE = say(Phrase.NOTES_NO_MODEL, ENGLISH)
MODEL_OFF_NOTICE = say(Phrase.NOTES_MODEL_OFF, ENGLISH)
TROUBLE_NOTICE = say(Phrase.NOTES_MODEL_TROUBLE, ENGLISH)
"""One short sentence each, for the learner.  How to set a model is the teacher's business: it goes to
``partners doctor`` and the log (:func:`model_status`), never into a learner's chat.  These are the
English; a turn reads every sentence here in its own language (``gateway/core/phrases.toml``)."""

SETUP_PROBLEM = say(Phrase.NOTES_SETUP_PROBLEM, ENGLISH)


def _notice(model: ModelSettings | None, because: OfflineReason) -> Phrase:
    if because is OfflineReason.MODEL_TROUBLE:
        return Phrase.NOTES_MODEL_TROUBLE
    return Phrase.NOTES_NO_MODEL if model is None else Phrase.NOTES_MODEL_OFF


def _quote(passage: Candidate, words: Sequence[str], subject: frozenset[str]) -> str:
    """The passage's title and section (and file and page), then an excerpt -- from its definition
    of the asked term when that sits too far in to show otherwise."""
    cite = f"**{passage.title}**" + (f" — {passage.heading}" if passage.heading else "")
    cite += f" ({passage.source})" if passage.source else ""
    text = passage.text
    at = definition_at(text, subject) if len(text) > EXCERPT_CHARS and subject else None
    if at is not None and at > EXCERPT_CHARS // 2:
        text = "… " + text[at:]
    body = "\n".join(f"> {line}" if line else ">" for line in excerpt(text, words).splitlines())
    return f"{cite}\n{body}"


def note_candidates(index: NotesIndex, persona: Persona, text: str, limit: int = CANDIDATES) -> list[Candidate]:
    """The persona's notes as ranking candidates, cited by their title only (a note's path means nothing to a learner)."""
    return [Candidate(p.title, p.heading, p.text, "", relevance) for p, relevance in index.scored(persona, text, limit)]


def document_candidates(hits: Sequence[Hit]) -> list[Candidate]:
    """A knowledge base's hits as ranking candidates, cited by file and page (``worksheet.pdf p. 3``)."""
    best = max((hit.score for hit in hits), default=0.0)
    return [
        Candidate(hit.document.title, hit.chunk.section, hit.chunk.text, hit.citation,
                  hit.score / best if best > 0 else 1.0)
        for hit in hits
    ]


def compose(
    persona: Persona, index: NotesIndex, text: str, model: ModelSettings | None = None,
    because: OfflineReason = OfflineReason.NO_MODEL, documents: Sequence[Candidate] = (), language: str = ENGLISH,
) -> str:
    """The whole answer in Markdown: one notice sentence, then quoted passages or the topics there are notes on.

    ``model`` is the partner's effective model (its own, else the persona's), for the notice;
    ``documents`` are the partner's knowledge-base hits, ranked together with the notes; ``language``
    is the turn's, for every sentence that is not a quote.
    """
    parts = [say(_notice(model, because), language)]
    passages = rank([*note_candidates(index, persona, text), *documents], text, MAX_PASSAGES)
    if passages:
        words, subject = query_words(text), subject_of(text)
        parts.extend(_quote(p, words, subject) for p in passages)
        return "\n\n".join(parts)
    topics = index.topics(persona)
    if not topics:
        parts.append(say(Phrase.NOTES_NONE_YET, language))
        return "\n\n".join(parts)
    lead = say(Phrase.NOTES_NOT_FOUND if fts_query(text) else Phrase.NOTES_ASK_TOPIC, language)
    listed = "\n".join(f"- {topic}" for topic in topics)
    parts.append(f"{lead}\n\n{listed}")
    return "\n\n".join(parts)


class DocumentSearch(Protocol):
    """The partner's knowledge base (:class:`brain.knowledge.service.KnowledgeService`)."""

    async def search_documents(self, partner: str, query: str, limit: int) -> list[Hit]:
        """That partner's documents only, best first; a failing knowledge base is logged and returns []."""
        ...


class NotesResponder:
    """The offline :class:`~gateway.core.turns.Responder`: quotes the partner's documents and its persona's notes.

    The brain hands it the turns of a partner without a model (``NO_MODEL``) and
    those whose model failed (``MODEL_TROUBLE``).  The learner reads one short
    sentence about why; the teacher reads how to fix it in a WARNING, once per
    partner for the life of the process, and in ``partners doctor``.
    """

    name = "notes"

    def __init__(self, search: Sequence[Path] = (), *, index: NotesIndex | None = None,
                 knowledge: DocumentSearch | None = None) -> None:
        self.search = list(search)
        self.index = index or NotesIndex()
        self.knowledge = knowledge
        self._warned: set[str] = set()

    @classmethod
    def from_config(cls, config: Config, *, knowledge: DocumentSearch | None = None) -> NotesResponder:
        """User personas next to the config; the index cached in ``<data_dir>/notes-index.db``."""
        return cls(persona_dirs(config), index=NotesIndex(config.data_dir / "notes-index.db"), knowledge=knowledge)

    def answer(self, partner: PartnerConfig, text: str, because: OfflineReason = OfflineReason.NO_MODEL,
               documents: Sequence[Candidate] = (), locale: str = "") -> str:
        """The offline answer, in the language :func:`~gateway.core.phrases.language_for` picks for the
        learner's ``locale`` and the partner's languages (the persona's when the partner names none)."""
        try:
            persona = load_persona(partner.persona, self.search)
        except ConfigError as error:
            log.error("persona does not load partner=%s persona=%s error=%s", partner.id, partner.persona, error)
            return say(Phrase.NOTES_SETUP_PROBLEM, language_for(partner.languages, locale))
        model = partner.model or persona.model
        if because is OfflineReason.NO_MODEL and model is None:
            self._tell_teacher(partner, persona)
        language = language_for(partner.languages or persona.languages, locale)
        return compose(persona, self.index, text, model, because, documents, language)

    def _tell_teacher(self, partner: PartnerConfig, persona: Persona) -> None:
        if partner.id in self._warned:
            return
        self._warned.add(partner.id)
        message, fix = model_status(persona, partner)
        log.warning("offline answers partner=%s persona=%s: %s; fix: %s", partner.id, persona.id, message, fix)

    async def documents(self, partner: PartnerConfig, text: str) -> list[Candidate]:
        """The partner's own knowledge-base hits (never another partner's), or [] when it is slow or broken."""
        if self.knowledge is None or fts_query(text) is None:
            return []
        try:
            hits = await asyncio.wait_for(self.knowledge.search_documents(partner.id, text, CANDIDATES), KB_SEARCH_TIMEOUT_S)
        except TimeoutError:
            log.warning("knowledge search too slow for an offline answer partner=%s timeout_s=%s", partner.id, KB_SEARCH_TIMEOUT_S)
            return []
        return document_candidates(hits)

    async def respond(self, turn: Turn, *, because: OfflineReason = OfflineReason.NO_MODEL) -> AsyncIterator[RuntimeEvent]:
        """Answer the turn from the notes and documents; ``because`` picks the notice (no model, or a model in trouble)."""
        said = [turn.text, *(m.text for m in turn.take_arrivals())]
        text = "\n".join(t for t in said if t)
        yield Progress(label="searching notes")
        documents = await self.documents(turn.partner, text)
        markdown = await asyncio.to_thread(self.answer, turn.partner, text, because, documents, turn.sender.locale)
        pieces = markdown.split("\n\n")
        for i, piece in enumerate(pieces):
            yield StreamDelta(text=piece if i == 0 else "\n\n" + piece)
        yield StreamEnd(markdown=markdown)
        yield TurnEnd()
