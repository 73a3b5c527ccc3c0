"""Builds the brain for a gateway configuration: personas, notes, tools, model, log, memory.

The gateway's composition root calls :func:`build_brain` and hands in the
services only the gateway can provide (reminders go through its outbox, teacher
takeovers through its pipeline, a forgotten learner's files are in its blob
store), and the model health record it reports from;
everything else is the brain's own.
"""

from __future__ import annotations

from functools import partial

import httpx

from brain.commands import Commands
from brain.health import ModelHealth
from brain.knowledge.service import KnowledgeService
from brain.loop import Brain
from brain.memory import MEMORY_FILE
from brain.memory.consolidate import Consolidator
from brain.memory.controls import MemoryControls, SentFiles
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


def build_brain(config: Config, *, scheduler: Scheduler, handoff: Handoff, health: ModelHealth | None = None,
                files: SentFiles | None = None) -> Brain:
    """``health`` hears how every partner's model calls go (the gateway's ``/status`` and metrics read it);
    ``files`` erases what a learner sent when they ``/forget`` (the gateway's blob store)."""
    search = persona_dirs(config)
    persona_for = partial(load_persona, search=search)
    index = NotesIndex(config.data_dir / "notes-index.db")
    quirks_path = config.data_dir / "model-quirks.json"
    quirks = ModelQuirks.load(quirks_path) if quirks_path.exists() else ModelQuirks(path=quirks_path)
    model = LitellmClient(quirks, health=health)
    log_ = SessionLog(config.data_dir / "brain.db")
    usage = UsageLedger(config.data_dir / "brain.db")
    store = MemoryStore(config.data_dir / MEMORY_FILE)
    memory = MemoryService(
        store, log_, consolidator=Consolidator(store, model, usage=usage),
        settings_for=lambda partner: partner.model or persona_for(partner.persona).model,
    )
    knowledge = KnowledgeService.from_config(config, notes=index)
    services = ToolServices(
        knowledge=knowledge,
        memory=memory,
        history=memory,
        scheduler=scheduler,
        handoff=handoff,
    )
    http = httpx.AsyncClient(trust_env=False, follow_redirects=False)
    return Brain(
        persona_for=persona_for,
        model=model,
        tools=default_registry(http),
        services=services,
        log_=log_,
        usage=usage,
        fallback=NotesResponder(search, index=index, knowledge=knowledge),
        memory=memory,
        commands=Commands(MemoryControls(store, log_, usage, files=files), log_),
    )
