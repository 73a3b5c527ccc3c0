"""Consolidated memory: Markdown per scope, written by the model, every statement footnoted to the trace.

When a scope has gathered :attr:`Consolidator.threshold` facts that no
document covers yet (or on demand), the model rewrites the scope's notes from
the previous notes and the facts, numbered ``[1]``, ``[2]``...  It cites them
as Markdown footnotes (``[^2]``); the stored document keeps the body and a map
from each footnote label to a trace id, and the fact behind the id carries the
conversation and message it came from -- a teacher can follow any sentence
back to what the learner said.  Labels the model invents are dropped (it
cannot make up provenance), and definitions it writes are replaced by ours.

One consolidation at a time per scope: a trigger that arrives while one runs
joins it instead of asking the model again.  A failed or empty answer keeps
the previous document.  Teachers may replace a document (``author: teacher``);
the next consolidation starts from their text.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from brain.markup import split_output
from brain.memory import trace
from brain.memory.scopes import Scope, ScopeKind
from brain.memory.store import MemoryStore
from brain.model import ModelClient, ModelError
from brain.types import ChatMessage, ModelRequest, ModelResult
from brain.usage import UsageLedger
from gateway.core.config import ModelSettings

log = logging.getLogger(__name__)

MAX_FACTS = 200
"""The newest facts a consolidation reads; older ones live on in the previous notes."""
_MARKER = re.compile(r"\[\^(\d+)\]")
_DEFINITION = re.compile(r"^\s*\[\^[^\]]+\]:.*$", re.MULTILINE)

CONSOLIDATE = (
    "You keep a tutor's private notes about {about}. Rewrite the notes as short Markdown (at most 300 words): "
    "goals, progress, difficulties, preferences and anything promised. Use only the previous notes and the "
    "numbered facts; never invent anything. After each statement cite the facts it rests on as footnote markers "
    "with the fact numbers, like [^2]. Do not write footnote definitions; they are added for you. "
    "Answer with the notes only."
)
ABOUT = {ScopeKind.LEARNER: "one learner", ScopeKind.GROUP: "one group chat", ScopeKind.OWNER: "the teacher you work for"}


@dataclass(frozen=True)
class Document:
    scope: Scope
    markdown: str
    """The body, with footnote markers ``[^n]`` and no definitions."""
    footnotes: Mapping[int, int] = field(default_factory=dict)
    """Footnote label -> trace fact id."""
    covered: frozenset[int] = frozenset()
    """Every fact id the notes were written from (cited or not)."""
    author: Literal["model", "teacher"] = "model"
    updated_at: float = 0.0


# --------------------------------------------------------------------------- storage


def load(conn: sqlite3.Connection, scope: Scope) -> Document | None:
    row = conn.execute(
        "SELECT markdown, footnotes, covered, author, updated_at FROM documents"
        " WHERE scope_kind = ? AND teacher = ? AND scope_key = ?", scope.columns,
    ).fetchone()
    if row is None:
        return None
    markdown, footnotes, covered, author, updated_at = row
    return Document(scope, markdown, {int(k): v for k, v in json.loads(footnotes).items()},
                    frozenset(json.loads(covered)), author, updated_at)


def save(conn: sqlite3.Connection, doc: Document) -> None:
    conn.execute(
        "INSERT INTO documents (scope_kind, teacher, scope_key, markdown, footnotes, covered, author, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope_kind, teacher, scope_key) DO UPDATE SET"
        " markdown = excluded.markdown, footnotes = excluded.footnotes, covered = excluded.covered,"
        " author = excluded.author, updated_at = excluded.updated_at",
        (*doc.scope.columns, doc.markdown, json.dumps({str(k): v for k, v in doc.footnotes.items()}),
         json.dumps(sorted(doc.covered)), doc.author, doc.updated_at),
    )


def delete(conn: sqlite3.Connection, scope: Scope) -> int:
    return conn.execute("DELETE FROM documents WHERE scope_kind = ? AND teacher = ? AND scope_key = ?", scope.columns).rowcount


def rekey(conn: sqlite3.Connection, source: Scope, target: Scope) -> None:
    """A merge: ``target`` keeps its notes if it has any, else takes ``source``'s.  Facts of the other
    side are not covered by the notes kept, so they show as new and count towards the next consolidation."""
    kept = load(conn, target)
    moved = load(conn, source)
    delete(conn, source)
    if kept is None and moved is not None:
        save(conn, Document(target, moved.markdown, moved.footnotes, moved.covered, moved.author, moved.updated_at))


def uncovered(conn: sqlite3.Connection, scope: Scope) -> list[trace.Fact]:
    doc = load(conn, scope)
    covered = doc.covered if doc else frozenset()
    return [f for f in trace.facts(conn, scope) if f.id not in covered]


# --------------------------------------------------------------------------- footnotes


def strip_footnotes(markdown: str) -> str:
    """The notes as the model reads them in a system prompt: no markers, no definitions."""
    return _MARKER.sub("", _DEFINITION.sub("", markdown)).strip()


def keep_known(markdown: str, numbering: Mapping[int, int]) -> tuple[str, dict[int, int]]:
    """Drop definitions and unknown markers, renumber the rest 1, 2, ... by first use.

    ``numbering`` maps the labels used in ``markdown`` to trace ids; the result maps the new labels."""
    body = _DEFINITION.sub("", markdown).strip()
    labels: dict[int, int] = {}  # trace id -> new label
    footnotes: dict[int, int] = {}

    def mark(match: re.Match[str]) -> str:
        fact = numbering.get(int(match.group(1)))
        if fact is None:
            return ""
        if fact not in labels:
            labels[fact] = len(labels) + 1
            footnotes[labels[fact]] = fact
        return f"[^{labels[fact]}]"

    return _MARKER.sub(mark, body), footnotes


def render(doc: Document, facts: Mapping[int, trace.Fact]) -> str:
    """The notes with a definition under every footnote: fact id, date, conversation and message."""
    lines = [doc.markdown.strip(), ""]
    for label, fact_id in sorted(doc.footnotes.items()):
        fact = facts.get(fact_id)
        if fact is None:
            lines.append(f"[^{label}]: fact {fact_id} (deleted)")
        else:
            p = fact.provenance
            lines.append(f"[^{label}]: fact {fact_id}, noted {day(fact.at)} in {p.conversation} (message {p.event_id}): {fact.text}")
    return "\n".join(lines).strip()


def day(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")


def prompt(scope: Scope, previous: Document | None, facts: list[trace.Fact]) -> tuple[list[ChatMessage], dict[int, int]]:
    """The consolidation request's messages, and the fact number -> trace id map it uses."""
    numbering = {number: fact.id for number, fact in enumerate(facts, 1)}
    by_fact = {fact_id: number for number, fact_id in numbering.items()}
    parts = []
    if previous is not None:
        old = {label: by_fact[f] for label, f in previous.footnotes.items() if f in by_fact}
        text = _MARKER.sub(lambda m: f"[^{old[int(m.group(1))]}]" if int(m.group(1)) in old else "", previous.markdown)
        parts.append(f"Previous notes:\n{text.strip()}")
    listed = "\n".join(f"[{number}] {day(fact.at)}: {fact.text}" for number, fact in enumerate(facts, 1))
    parts.append(f"Facts:\n{listed}")
    system = CONSOLIDATE.format(about=ABOUT.get(scope.kind, "one learner"))
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content="\n\n".join(parts))], numbering


# --------------------------------------------------------------------------- the consolidator


class Consolidator:
    """Runs consolidations in the background, at most one per scope at a time."""

    def __init__(self, store: MemoryStore, model: ModelClient, *, threshold: int = 5,
                 clock: Callable[[], float] = time.time, usage: UsageLedger | None = None) -> None:
        self.store = store
        self.model = model
        self.usage = usage
        """Where the tokens of background consolidations are charged (the learner's and partner's day)."""
        self.threshold = threshold
        self.clock = clock
        self._running: dict[Scope, asyncio.Task[Document | None]] = {}

    def maybe_start(self, scope: Scope, settings: ModelSettings | None, new_facts: int, *,
                    charge_to: tuple[str, str] | None = None) -> asyncio.Task[Document | None] | None:
        """Start a background consolidation once ``new_facts`` (uncovered facts) reach the threshold.

        ``charge_to`` is ``(partner, budget key)``: whose daily budget the model's tokens count against."""
        if settings is None or new_facts < self.threshold or scope.kind is ScopeKind.PARTNER_NOTES:
            return None
        return self._task(scope, settings, charge_to)

    async def consolidate(self, scope: Scope, settings: ModelSettings, *,
                          charge_to: tuple[str, str] | None = None) -> Document | None:
        """Consolidate now (or join the one running); the document stored afterwards, if any."""
        return await asyncio.shield(self._task(scope, settings, charge_to))

    def _task(self, scope: Scope, settings: ModelSettings, charge_to: tuple[str, str] | None) -> asyncio.Task[Document | None]:
        running = self._running.get(scope)
        if running is None:
            running = asyncio.create_task(self._run(scope, settings, charge_to), name=f"consolidate:{scope}")
            self._running[scope] = running
            running.add_done_callback(lambda done: self._finished(scope, done))
        return running

    def _finished(self, scope: Scope, task: asyncio.Task[Document | None]) -> None:
        if self._running.get(scope) is task:
            del self._running[scope]
        if not task.cancelled() and task.exception() is not None:
            log.warning("consolidation failed scope=%s", scope.kind.value, exc_info=task.exception())

    async def idle(self) -> None:
        """Wait for every running consolidation (tests, shutdown)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def stop(self) -> None:
        """Cancel every running consolidation (shutdown): its facts stay uncovered, and the next one takes them."""
        running = list(self._running.values())
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    async def _run(self, scope: Scope, settings: ModelSettings, charge_to: tuple[str, str] | None) -> Document | None:
        def read(conn: sqlite3.Connection) -> tuple[Document | None, list[trace.Fact]]:
            return load(conn, scope), trace.facts(conn, scope, limit=MAX_FACTS)

        previous, facts = await self.store.run(read)
        if not facts or (previous is not None and {f.id for f in facts} <= previous.covered):
            return previous
        messages, numbering = prompt(scope, previous, facts)
        try:
            text = await self._ask(ModelRequest(settings=settings, messages=tuple(messages)), charge_to)
        except ModelError as error:
            log.info("consolidation skipped scope=%s kind=%s error=%s", scope.kind.value, error.kind.value, error)
            return previous
        visible, _reasoning = split_output(text)
        body, footnotes = keep_known(visible, numbering)
        if not body.strip():
            log.info("consolidation skipped scope=%s reason=empty answer", scope.kind.value)
            return previous
        covered = frozenset(numbering.values()) | (previous.covered if previous else frozenset())
        doc = Document(scope, body, footnotes, covered, "model", self.clock())

        def store(conn: sqlite3.Connection) -> bool:
            # The scope may have changed while the model wrote (a teacher's delete, /forget, a merge):
            # notes about facts this scope no longer holds are dropped, never resurrected.
            still = trace.by_ids(conn, numbering.values())
            if len(still) < len(numbering) or any(f.scope != scope for f in still.values()):
                return False
            save(conn, doc)
            return True

        if not await self.store.run(store):
            log.info("consolidation dropped scope=%s reason=facts changed meanwhile", scope.kind.value)
            return None
        log.info("consolidated scope=%s facts=%d footnotes=%d", scope.kind.value, len(facts), len(footnotes))
        return doc

    async def _ask(self, request: ModelRequest, charge_to: tuple[str, str] | None) -> str:
        result: ModelResult | None = None
        async for item in self.model.stream(request):
            if isinstance(item, ModelResult):
                result = item
        if result is not None and self.usage is not None and charge_to is not None:
            await self.usage.record(*charge_to, result.usage)
        return result.text if result is not None else ""
