"""A real brain with real memory against the stub model, and a rig to talk to it as several people.

The brain is wired as ``brain.factory`` wires it -- ``MemoryService`` behind the
memory and history tools and the loop, ``MemoryControls`` behind the learner
commands -- on a temporary data dir, with litellm talking HTTP to the stub
model on 127.0.0.1.  :meth:`Rig.say` runs one turn and records which stub
requests it caused, so a test can read exactly the requests built for Bob.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import yaml

from brain.commands import Commands
from brain.loop import Brain, BrainSettings
from brain.memory.consolidate import Consolidator
from brain.memory.controls import MemoryControls
from brain.memory.service import MemoryService
from brain.memory.store import MemoryStore
from brain.model import LitellmClient, ModelQuirks
from brain.notes import NotesIndex, NotesResponder
from brain.session_log import SessionLog
from brain.tools.base import ToolServices
from brain.tools.builtin import default_registry
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
from personas.loader import load_persona
from tests.peers.model_stub import ModelStub

PACKAGED = Path(__file__).resolve().parents[2] / "personas"
TOOLS = ["knowledge_search", "memory_read", "memory_write", "history_search"]


class Clock:
    """Wall-clock seconds that a test can move forward (link codes and /forget expire after 10 minutes)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@dataclass
class Said:
    """One turn: what the speaker got back and the stub requests the turn caused."""

    reply: str
    requests: list[dict]
    ended: TurnEnd


@dataclass
class Rig:
    brain: Brain
    stub: ModelStub
    memory: MemoryService
    controls: MemoryControls
    consolidator: Consolidator
    log: SessionLog
    usage: UsageLedger
    data_dir: Path
    partner: PartnerConfig
    clock: Clock
    requests_by: dict[str, list[dict]] = field(default_factory=dict)
    """Every stub request, by the user whose turn caused it."""
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def turn(self, user: str, text: str, *, channel: str = "webchat", account: str = "default", group: str | None = None,
             name: str | None = None, partner: PartnerConfig | None = None, role: Role = Role.LEARNER) -> Turn:
        kind = ConversationKind.GROUP if group else ConversationKind.DIRECT
        address = Address(channel=ChannelName(channel), account=AccountId(account),
                          conversation=Conversation(chat=ChatId(group or f"dm-{user}"), kind=kind))
        sender = Sender(user=UserId(user), display_name=name or user.title())
        message = InboundMessage(event_id=EventId(f"{user}-{next(self._ids)}"), address=address, sender=sender,
                                 elements=(Text(text=text),), received_at=datetime.now(UTC), addressed=True)
        return Turn(partner or self.partner, address, sender, role, [message])

    async def say(self, user: str, text: str, **where) -> Said:
        turn = self.turn(user, text, **where)
        return await self.run(turn)

    async def run(self, turn: Turn) -> Said:
        before = len(self.stub.requests)
        events = [event async for event in self.brain.respond(turn)]
        caused = self.stub.requests[before:]
        self.requests_by.setdefault(turn.sender.user, []).extend(caused)
        reply = next(e.markdown for e in events if isinstance(e, StreamEnd))
        assert isinstance(events[-1], TurnEnd)
        return Said(reply, caused, events[-1])


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("STUB_KEY", "sk-test")


@pytest.fixture
async def stub():
    async with ModelStub() as server:
        yield server


@pytest.fixture
def persona_dir(tmp_path) -> Path:
    """study-buddy with the history search switched on and a small round budget."""
    folder = tmp_path / "personas" / "tiny-tutor"
    shutil.copytree(PACKAGED / "study-buddy", folder)
    spec = yaml.safe_load((folder / "persona.yaml").read_text())
    spec.update(name="Tiny Tutor", tools=TOOLS)
    spec["policies"].update(max_rounds=3, settle_rounds=1, mid_turn="merge")
    (folder / "persona.yaml").write_text(yaml.safe_dump(spec))
    return tmp_path / "personas"


def partner_config(stub: ModelStub, partner_id: str = "tutor", owner: str = "teacher") -> PartnerConfig:
    return PartnerConfig(
        id=partner_id, name="Tiny Tutor", persona="tiny-tutor", owners=(OwnerRef(channel="console", user=owner),),
        model=ModelSettings(model="openai/stub-model", api_base=stub.api_base, api_key="env:STUB_KEY"),
    )


@pytest.fixture
async def rig(stub, tmp_path, persona_dir):
    data = tmp_path / "data"
    clock = Clock()

    def persona_for(name: str):
        return load_persona(name, [persona_dir])

    model = LitellmClient(ModelQuirks(), sleep=lambda s: asyncio.sleep(0))
    log = SessionLog(data / "brain.db")
    usage = UsageLedger(data / "brain.db")
    store = MemoryStore(data / "memory.db")
    consolidator = Consolidator(store, model, threshold=50, clock=clock, usage=usage)
    memory = MemoryService(store, log, consolidator=consolidator,
                           settings_for=lambda partner: partner.model or persona_for(partner.persona).model, clock=clock)
    controls = MemoryControls(store, log, usage, clock=clock)
    index = NotesIndex(data / "notes.db")
    brain = Brain(
        persona_for=persona_for, model=model, tools=default_registry(httpx.AsyncClient(trust_env=False)),
        services=ToolServices(memory=memory, history=memory), log_=log, usage=usage,
        fallback=NotesResponder([persona_dir], index=index), settings=BrainSettings(),
        memory=memory, commands=Commands(controls, log),
    )
    yield Rig(brain, stub, memory, controls, consolidator, log, usage, data, partner_config(stub), clock)
    await consolidator.idle()
    store.close()
    log.close()
    usage.close()
