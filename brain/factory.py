"""The brain's one composition root: personas, notes, tools, model, log, memory -- and what teachers reach.

:func:`build_brain` builds the brain for a gateway configuration.  The gateway
hands in the services only it can provide (reminders go through its outbox,
teacher takeovers through its pipeline, a forgotten learner's files are in its
blob store) and the model health record it reports from; everything else is the brain's own.  It returns a
:class:`BuiltBrain`: the responder, the teachers' memory controls (sharing the
turns' per-person locks, so an edit of a learner waits for that learner's
turn), the knowledge service, and ``close()``, which the gateway calls on
shutdown.

:func:`build_controls` is the same wiring without the model, the tools and
the responder, for a process that runs no turns (the ``partners`` CLI).  Both
open the brain's files through :func:`_open_files` and build the controls in
:func:`_guarded`: one wiring, not two.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import httpx

from brain.commands import Commands
from brain.health import ModelHealth
from brain.knowledge.service import KnowledgeService
from brain.locks import KeyedLocks
from brain.loop import Brain
from brain.memory import MEMORY_FILE
from brain.memory.consolidate import Consolidator
from brain.memory.controls import MemoryControls, SentFiles
from brain.memory.guarded import GuardedControls
from brain.memory.service import MemoryService
from brain.memory.store import MemoryStore
from brain.model import LitellmClient, ModelQuirks
from brain.notes import NotesIndex, NotesResponder
from brain.session_log import SessionLog
from brain.tools.base import ToolServices
from brain.tools.builtin import default_registry
from brain.tools.services import Handoff, Scheduler
from brain.usage import UsageLedger
from gateway.core.config import Config
from personas.loader import load_persona, persona_dirs

BRAIN_FILE = "brain.db"
"""The session log and the usage ledger share this file in the data dir."""
NOTES_INDEX_FILE = "notes-index.db"


@dataclass(frozen=True)
class BrainFiles:
    """The brain's stores in one data dir, opened once per process and closed together."""

    memory: MemoryStore
    log: SessionLog
    usage: UsageLedger
    notes: NotesIndex
    knowledge: KnowledgeService

    async def close(self) -> None:
        await self.knowledge.close()
        self.notes.close()
        self.memory.close()
        self.log.close()
        self.usage.close()


@dataclass(frozen=True)
class BrainControls:
    """What is done to the brain's data from outside a turn: a teacher's memory controls, the knowledge service."""

    memory: GuardedControls
    knowledge: KnowledgeService
    files: BrainFiles

    async def close(self) -> None:
        await self.files.close()


@dataclass(frozen=True)
class BuiltBrain(BrainControls):
    """The brain and its parts; whoever built it (the gateway) calls :meth:`close` once, after the last turn."""

    responder: Brain
    http: httpx.AsyncClient
    """The tools' HTTP client."""
    consolidator: Consolidator
    """Background memory consolidations, cancelled on close (their facts stay for the next one)."""

    async def close(self) -> None:
        # The model client holds no connection of its own: litellm's are the library's, process-wide.
        await self.consolidator.stop()
        await self.http.aclose()
        await super().close()


def _open_files(config: Config) -> BrainFiles:
    notes = NotesIndex(config.data_dir / NOTES_INDEX_FILE)
    return BrainFiles(
        memory=MemoryStore(config.data_dir / MEMORY_FILE),
        log=SessionLog(config.data_dir / BRAIN_FILE),
        usage=UsageLedger(config.data_dir / BRAIN_FILE),
        notes=notes,
        knowledge=KnowledgeService.from_config(config, notes=notes),
    )


def _guarded(files: BrainFiles, locks: KeyedLocks, sent: SentFiles | None = None) -> GuardedControls:
    return GuardedControls(MemoryControls(files.memory, files.log, files.usage, files=sent), locks)


def build_controls(config: Config) -> BrainControls:
    """The controls alone, for a process without turns: their locks guard only this process's own callers."""
    files = _open_files(config)
    return BrainControls(memory=_guarded(files, KeyedLocks()), knowledge=files.knowledge, files=files)


def build_brain(config: Config, *, scheduler: Scheduler | None, handoff: Handoff | None,
                health: ModelHealth | None = None, sent_files: SentFiles | None = None) -> BuiltBrain:
    """``health`` hears how every partner's model calls go (the gateway's ``/status`` and metrics read it);
    ``sent_files`` erases what a learner sent when they are forgotten (the gateway's blob store).

    Without a ``scheduler`` or ``handoff`` (a benchmark) those tools answer that the service is missing."""
    search = persona_dirs(config)
    persona_for = partial(load_persona, search=search)
    files = _open_files(config)
    quirks_path = config.data_dir / "model-quirks.json"
    quirks = ModelQuirks.load(quirks_path) if quirks_path.exists() else ModelQuirks(path=quirks_path)
    model = LitellmClient(quirks, health=health)
    consolidator = Consolidator(files.memory, model, usage=files.usage)
    memory = MemoryService(
        files.memory, files.log, consolidator=consolidator,
        settings_for=lambda partner: partner.model or persona_for(partner.persona).model,
    )
    services = ToolServices(knowledge=files.knowledge, memory=memory, history=memory, scheduler=scheduler, handoff=handoff)
    http = httpx.AsyncClient(trust_env=False, follow_redirects=False)
    locks = KeyedLocks()
    brain = Brain(
        persona_for=persona_for,
        model=model,
        tools=default_registry(http),
        services=services,
        log_=files.log,
        usage=files.usage,
        fallback=NotesResponder(search, index=files.notes, knowledge=files.knowledge),
        memory=memory,
        commands=Commands(MemoryControls(files.memory, files.log, files.usage, files=sent_files), files.log),
        locks=locks,
    )
    return BuiltBrain(memory=_guarded(files, locks, sent_files), knowledge=files.knowledge, files=files,
                      responder=brain, http=http, consolidator=consolidator)
