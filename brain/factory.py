"""Builds the brain for a gateway configuration: personas, notes, tools, model, log.

The gateway's composition root calls :func:`build_brain` and hands in the two
services only the gateway can provide (reminders go through its outbox, teacher
takeovers through its pipeline); everything else is the brain's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial

import httpx

from brain.loop import Brain
from brain.model import LitellmClient, ModelQuirks
from brain.notes import NotesIndex, NotesResponder
from brain.session_log import SessionLog
from brain.tools.base import ToolServices
from brain.tools.builtin import default_registry
from brain.tools.builtin.handoff import Handoff
from brain.tools.builtin.knowledge import Passage
from brain.tools.builtin.memory import InMemoryGates
from brain.tools.builtin.reminder import Scheduler
from brain.usage import UsageLedger
from gateway.config import Config
from personas.loader import Persona, load_persona, persona_dirs


class NotesKnowledge:
    """``knowledge_search`` over a partner persona's notes, through the same FTS5 index the
    offline responder uses (one index, two readers)."""

    def __init__(self, index: NotesIndex, persona_of_partner: Callable[[str], Persona]) -> None:
        self.index = index
        self.persona_of_partner = persona_of_partner

    async def search(self, partner_id: str, query: str, limit: int) -> list[Passage]:
        persona = self.persona_of_partner(partner_id)
        found = await asyncio.to_thread(self.index.search, persona, query, limit)
        return [
            Passage(title=f"{p.title} — {p.heading}" if p.heading else p.title, text=p.text, source=f"{persona.id}/{p.path}")
            for p in found
        ]


def build_brain(config: Config, *, scheduler: Scheduler, handoff: Handoff) -> Brain:
    search = persona_dirs(config)
    persona_for = partial(load_persona, search=search)
    partners = {p.id: p for p in config.partners}
    index = NotesIndex(config.data_dir / "notes-index.db")
    quirks_path = config.data_dir / "model-quirks.json"
    services = ToolServices(
        knowledge=NotesKnowledge(index, lambda partner_id: persona_for(partners[partner_id].persona)),
        memory=InMemoryGates(),
        scheduler=scheduler,
        handoff=handoff,
    )
    http = httpx.AsyncClient(trust_env=False, follow_redirects=False)
    return Brain(
        persona_for=persona_for,
        model=LitellmClient(ModelQuirks.load(quirks_path) if quirks_path.exists() else ModelQuirks(path=quirks_path)),
        tools=default_registry(http),
        services=services,
        log_=SessionLog(config.data_dir / "brain.db"),
        usage=UsageLedger(config.data_dir / "brain.db"),
        fallback=NotesResponder(search, index=index),
    )
