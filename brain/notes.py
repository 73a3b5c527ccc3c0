"""The offline responder: answers from a persona's study notes when no language model is configured.

It is honest about what it is -- every answer says no model is configured and
how a teacher sets one -- and still useful: it searches the persona's notes
(its ``knowledge`` sources) with SQLite FTS5 and quotes the best paragraphs,
each under its note's title, or lists the topics it has notes on.

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

from brain.types import ModelSettings
from gateway.config import Config, PartnerConfig
from gateway.errors import ConfigError
from gateway.events import Progress, RuntimeEvent, StreamDelta, StreamEnd, TurnEnd
from gateway.turns import Turn
from personas.loader import Persona, load_persona, persona_dirs

log = logging.getLogger(__name__)

NOTE_SUFFIXES = (".md", ".markdown", ".txt")
SCHEMA_VERSION = 1
MAX_PASSAGES = 3
RELEVANCE_RATIO = 0.7
"""Quote a passage only if its bm25 score is at least this fraction of the best one's."""
EXCERPT_CHARS = 420
SHORT_SECTION_CHARS = 300
"""Consecutive paragraphs of one section are one passage while together they stay this short."""
MAX_QUERY_WORDS = 24

_STOPWORDS = frozenset("""
a about above after again all also am an and any are as at be because been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers him his how i
if in into is it its just me more most my no nor not now of off on once only or other our out over own same she should
so some such than that the their them then there these they this those through to too under until up very was we were
what when where which while who whom why will with would you your yours
explain tell show give help please thanks thank know want need understand mean means meaning question questions
hi hello hey ok okay yes yeah
el la los las un una unos unas de del y o que en es por para con se su qué cómo cuál como
le les des du et ou est pour avec une dans ce qui quoi comment
""".split())
_WORD = re.compile(r"[^\W_]+")
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
    """Every note file of the persona's knowledge sources, as (path relative to the folder, path)."""
    found: dict[str, Path] = {}
    for source in persona.knowledge_paths():
        candidates = sorted(source.rglob("*")) if source.is_dir() else [source]
        for path in candidates:
            if path.is_file() and path.suffix.lower() in NOTE_SUFFIXES:
                found.setdefault(path.relative_to(persona.folder).as_posix(), path)
    return sorted(found.items())


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


def query_words(text: str) -> list[str]:
    """The words worth searching for: letters and digits only, casefolded, no stopwords, each once."""
    words: list[str] = []
    for word in _WORD.findall(text.casefold()):
        if word not in _STOPWORDS and (len(word) > 1 or word.isdigit()) and word not in words:
            words.append(word)
            if len(words) == MAX_QUERY_WORDS:
                break
    return words


def fts_query(text: str) -> str | None:
    """The learner's words as an FTS5 query of quoted terms joined by OR; None when no word is left.

    Only letters and digits survive, each term inside double quotes, so no
    input can form FTS5 syntax (operators, column filters, prefixes, groups).
    """
    return " OR ".join(f'"{word}"' for word in query_words(text)) or None


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
        except sqlite3.DatabaseError:
            if path is None:
                raise
            log.warning("notes index unreadable, rebuilding path=%s", path)
            path.unlink(missing_ok=True)
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(str(self.path) if self.path else ":memory:", check_same_thread=False)
        try:
            self._create(db)
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    @staticmethod
    def _create(db: sqlite3.Connection) -> None:
        """Create the tables, dropping any of an older layout: the index is a cache, rebuilt on demand."""
        if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            db.executescript(f"""
                DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS notes; DROP TABLE IF EXISTS passages;
                CREATE TABLE files (folder TEXT, path TEXT, mtime_ns INTEGER, size INTEGER, PRIMARY KEY (folder, path));
                CREATE TABLE notes (folder TEXT, path TEXT, title TEXT, PRIMARY KEY (folder, path));
                CREATE VIRTUAL TABLE passages USING fts5(
                    title, heading, body, folder UNINDEXED, path UNINDEXED,
                    tokenize = 'porter unicode61 remove_diacritics 2');
                PRAGMA user_version = {SCHEMA_VERSION};
            """)

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
        return [Passage(*row[:4]) for row in rows if row[4] <= best * RELEVANCE_RATIO]

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
        f"{who} has no language model configured: it answers by quoting its study notes",
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


def _notice(persona: Persona, model: ModelSettings | None) -> str:
    if model is None:
        return (
            "_No language model is configured, so I can only share what my study notes say._\n"
            f"(For my teacher: set `model:` in the {persona.id} persona's persona.yaml or in the partner's config, "
            "then restart the gateway; `partners doctor` checks the setup.)"
        )
    return (
        "_I'm answering from my study notes only: this gateway runs the offline notes responder, "
        f"so my language model ({model.model}) is not in use._\n"
        "(For my teacher: `partners doctor` shows which responder runs.)"
    )


def _trouble_notice() -> str:
    return "_I'm having trouble reaching my thinking engine right now, so here is what my notes say._"


def _quote(passage: Passage, words: Sequence[str]) -> str:
    cite = f"**{passage.title}**" + (f" — {passage.heading}" if passage.heading else "")
    body = "\n".join(f"> {line}" if line else ">" for line in excerpt(passage.text, words).splitlines())
    return f"{cite}\n{body}"


class OfflineReason(str, Enum):
    """Why a turn is answered from the notes rather than by the model: it decides the one-line notice."""

    NO_MODEL = "no model"
    """The partner has no model configured."""
    MODEL_TROUBLE = "model trouble"
    """A model is configured but failed (down, hanging, refusing) after its retry and its backup."""


def compose(
    persona: Persona, index: NotesIndex, text: str, model: ModelSettings | None = None,
    because: OfflineReason = OfflineReason.NO_MODEL,
) -> str:
    """The whole answer in Markdown: the notice, then quoted passages or the topics there are notes on.

    ``model`` is the partner's effective model (its own, else the persona's), for the notice.
    """
    parts = [_trouble_notice() if because is OfflineReason.MODEL_TROUBLE else _notice(persona, model)]
    passages = index.search(persona, text)
    if passages:
        parts.append("Here is what my notes say:")
        words = query_words(text)
        parts.extend(_quote(p, words) for p in passages)
        return "\n\n".join(parts)
    topics = index.topics(persona)
    if not topics:
        parts.append("I don't have any study notes yet, so I can't look that up. My teacher can add some.")
        return "\n\n".join(parts)
    lead = "I couldn't find that in my notes." if fts_query(text) else "Ask me about a topic and I'll look it up in my notes."
    listed = "\n".join(f"- {topic}" for topic in topics)
    parts.append(f"{lead} I have notes on:\n\n{listed}")
    return "\n\n".join(parts)


SETUP_PROBLEM = (
    "I can't open my study notes right now because something in my setup needs fixing. "
    "My teacher can find it with `partners doctor`."
)


class NotesResponder:
    """The offline default :class:`~gateway.turns.Responder`: quotes the partner persona's notes."""

    name = "notes"

    def __init__(self, search: Sequence[Path] = (), *, index: NotesIndex | None = None) -> None:
        self.search = list(search)
        self.index = index or NotesIndex()

    @classmethod
    def from_config(cls, config: Config) -> "NotesResponder":
        """User personas next to the config; the index cached in ``<data_dir>/notes-index.db``."""
        return cls(persona_dirs(config), index=NotesIndex(config.data_dir / "notes-index.db"))

    def answer(self, partner: PartnerConfig, text: str, because: OfflineReason = OfflineReason.NO_MODEL) -> str:
        try:
            persona = load_persona(partner.persona, self.search)
        except ConfigError as error:
            log.error("persona does not load partner=%s persona=%s error=%s", partner.id, partner.persona, error)
            return SETUP_PROBLEM
        return compose(persona, self.index, text, partner.model or persona.model, because)

    async def respond(self, turn: Turn, *, because: OfflineReason = OfflineReason.NO_MODEL) -> AsyncIterator[RuntimeEvent]:
        """Answer the turn from the notes; ``because`` picks the notice (no model, or a model in trouble)."""
        said = [turn.text, *(m.text for m in turn.take_arrivals())]
        yield Progress(label="searching notes")
        markdown = await asyncio.to_thread(self.answer, turn.partner, "\n".join(t for t in said if t), because)
        pieces = markdown.split("\n\n")
        for i, piece in enumerate(pieces):
            yield StreamDelta(text=piece if i == 0 else "\n\n" + piece)
        yield StreamEnd(markdown=markdown)
        yield TurnEnd()
