"""A real brain with every built-in tool enabled, its memory on disk, and litellm talking to the stub model.

Wired as ``brain.factory`` wires it -- ``MemoryService`` behind the memory and
history tools, ``KnowledgeService`` over the persona's notes, the real
registry -- on a temporary data dir.  Only the two services the gateway lends
the brain are stand-ins: :class:`Reminders` and :class:`Teacher` accept and
*remember* what they are given, so a tool that read them back for another
learner would show it.  ``fetch_page`` may reach one stub site (127.0.0.3) and
nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import shutil
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import yaml

from brain.commands import Commands
from brain.knowledge.service import KnowledgeService
from brain.loop import Brain, BrainSettings
from brain.memory.consolidate import Consolidator
from brain.memory.controls import MemoryControls
from brain.memory.service import MemoryService
from brain.memory.store import MemoryStore
from brain.model import LitellmClient, ModelQuirks
from brain.notes import NotesIndex, NotesResponder
from brain.session_log import SessionLog, ToolReturned, TurnStarted
from brain.tools.base import ToolServices
from brain.tools.builtin import TOOL_NAMES, default_registry
from brain.tools.services import ScheduleResult
from brain.usage import UsageLedger
from gateway.core.config import ModelSettings, OwnerRef, PartnerConfig
from gateway.core.events import StreamEnd, TurnEnd
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    Sender,
    Text,
    UserId,
)
from gateway.core.turns import Role, Turn
from personas.loader import Persona, load_persona
from tests.peers.model_stub import ModelStub
from tests.security.probes.listeners import Listener, listening

PACKAGED = Path(__file__).resolve().parents[3] / "personas"
SITE_HOST = "127.0.0.3"
SITE_NAME = "course.test"


@dataclass
class Reminders:
    """The gateway's scheduler, as the brain sees it: accepts, and keeps every reminder it was given."""

    kept: list[tuple[Address, datetime, str]] = field(default_factory=list)

    async def schedule(self, address: Address, at: datetime, text: str) -> ScheduleResult:
        self.kept.append((address, at, text))
        return ScheduleResult(accepted=True)


@dataclass
class Teacher:
    """The gateway's hand-off to the teacher: keeps every reason it was told."""

    told: list[tuple[Address, str]] = field(default_factory=list)

    async def hand_to_teacher(self, address: Address, reason: str, locale: str = "") -> str:
        self.told.append((address, reason))
        return f"(request {len(self.told)})"


@dataclass
class Said:
    reply: str
    requests: list[dict]
    """The stub requests this turn caused, as the stub received them."""
    results: list[ToolReturned]
    """The tool results this turn fed back to the model, from the session log."""


@dataclass
class ToolRig:
    brain: Brain
    stub: ModelStub
    memory: MemoryService
    consolidator: Consolidator
    log: SessionLog
    partner: PartnerConfig
    site: Listener
    reminders: Reminders
    teacher: Teacher
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def turn(self, user: str, text: str) -> Turn:
        address = Address(channel=ChannelName("webchat"), account=AccountId("default"),
                          conversation=Conversation(chat=ChatId(f"dm-{user}"), kind=ConversationKind.DIRECT))
        sender = Sender(user=UserId(user), display_name=user.title())
        message = InboundMessage(event_id=EventId(f"{user}-{next(self._ids)}"), address=address, sender=sender,
                                 elements=(Text(text=text),), received_at=datetime.now(UTC), addressed=True)
        return Turn(self.partner, address, sender, Role.LEARNER, [message])

    async def say(self, user: str, text: str) -> Said:
        turn = self.turn(user, text)
        before = len(self.stub.requests)
        events = [event async for event in self.brain.respond(turn)]
        assert isinstance(events[-1], TurnEnd)
        reply = next(e.markdown for e in events if isinstance(e, StreamEnd))
        key = (await self.memory.session(turn)).history_key
        entries = await self.log.read(key)
        started = [e.event.turn for e in entries if isinstance(e.event, TurnStarted)]
        results = [e.event for e in entries if isinstance(e.event, ToolReturned) and e.event.turn == started[-1]]
        return Said(reply, self.stub.requests[before:], results)

    def site_url(self, path: str = "/page") -> str:
        return f"http://{SITE_NAME}:{self.site.port}{path}"


def _persona_dir(root: Path) -> Path:
    """study-buddy with every built-in tool enabled."""
    folder = root / "personas" / "all-tools"
    shutil.copytree(PACKAGED / "study-buddy", folder)
    spec = yaml.safe_load((folder / "persona.yaml").read_text())
    spec.update(name="All Tools", tools=sorted(TOOL_NAMES))
    spec["policies"].update(max_rounds=3, settle_rounds=1)
    (folder / "persona.yaml").write_text(yaml.safe_dump(spec))
    return root / "personas"


async def _site_only(host: str, port: int) -> Sequence[str]:
    if host == SITE_NAME:
        return [SITE_HOST]
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@contextlib.asynccontextmanager
async def tool_rig(root: Path) -> AsyncIterator[ToolRig]:
    data, personas = root / "data", _persona_dir(root)

    def persona_for(name: str) -> Persona:
        return load_persona(name, [personas])

    async with ModelStub() as stub, listening(SITE_HOST) as site, httpx.AsyncClient(trust_env=False) as http:
        partner = PartnerConfig(
            id="tutor", name="All Tools", persona="all-tools", owners=(OwnerRef(channel="console", user="teacher"),),
            model=ModelSettings.model_validate({"model": "openai/stub-model", "api_base": stub.api_base,
                                                "api_key": "env:STUB_KEY"}),
        )
        model = LitellmClient(ModelQuirks(), sleep=lambda s: asyncio.sleep(0))
        log, usage, store = SessionLog(data / "brain.db"), UsageLedger(data / "brain.db"), MemoryStore(data / "memory.db")
        consolidator = Consolidator(store, model, threshold=50, usage=usage)
        memory = MemoryService(store, log, consolidator=consolidator,
                               settings_for=lambda p: p.model or persona_for(p.persona).model)
        index = NotesIndex(data / "notes.db")
        knowledge = KnowledgeService(data / "knowledge", notes=index, persona_of=lambda _partner: persona_for("all-tools"))
        reminders, teacher = Reminders(), Teacher()
        tools = default_registry(http, resolver=_site_only, allowed_networks=[ipaddress.ip_network(f"{SITE_HOST}/32")])
        brain = Brain(
            persona_for=persona_for, model=model, tools=tools,
            services=ToolServices(knowledge=knowledge, memory=memory, history=memory, scheduler=reminders, handoff=teacher),
            log_=log, usage=usage, fallback=NotesResponder([personas], index=index), settings=BrainSettings(),
            memory=memory, commands=Commands(MemoryControls(store, log, usage), log),
        )
        try:
            yield ToolRig(brain, stub, memory, consolidator, log, partner, site, reminders, teacher)
        finally:
            await consolidator.idle()
            store.close()
            log.close()
            usage.close()
