"""The agent loop's rules, each against real litellm talking HTTP to the stub model."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import yaml

from brain.knowledge.service import KnowledgeService
from brain.loop import APOLOGY, BROKE_OFF, BUDGET_LEARNER, FORCED, SUMMARIZE, WRAP_UP, Brain, BrainSettings
from brain.model import LitellmClient, ModelQuirks
from brain.notes import TROUBLE_NOTICE, NotesIndex, NotesResponder
from brain.session_log import AssistantSaid, SessionLog, Summarized, TurnEnded, TurnStarted
from brain.tools.base import ToolServices
from brain.tools.builtin import default_registry
from brain.usage import UsageLedger
from gateway.core.config import ModelSettings, PartnerConfig
from gateway.core.events import StreamDelta, StreamEnd, TurnEnd
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
from gateway.core.phrases import Phrase, say
from gateway.core.turns import Role, Turn
from personas.loader import load_persona
from tests.peers.model_stub import ModelStub, Reply

PACKAGED = Path(__file__).resolve().parents[2] / "personas"


@pytest.fixture
async def stub():
    async with ModelStub() as server:
        yield server


@pytest.fixture
def persona_dir(tmp_path):
    """A copy of study-buddy with small round budgets, so the round rules show quickly."""
    folder = tmp_path / "personas" / "tiny-tutor"
    shutil.copytree(PACKAGED / "study-buddy", folder)
    spec = yaml.safe_load((folder / "persona.yaml").read_text())
    spec["name"] = "Tiny Tutor"
    spec["policies"].update(max_rounds=2, settle_rounds=1, mid_turn="merge")
    (folder / "persona.yaml").write_text(yaml.safe_dump(spec))
    return tmp_path / "personas"


def build(tmp_path, persona_dir, *, budget=None, history_tokens=6000) -> Brain:
    if budget is not None:
        spec_path = persona_dir / "tiny-tutor" / "persona.yaml"
        spec = yaml.safe_load(spec_path.read_text())
        spec["policies"]["daily_token_budget_per_learner"] = budget
        spec_path.write_text(yaml.safe_dump(spec))
    index = NotesIndex(tmp_path / "notes.db")
    persona_for = lambda name: load_persona(name, [persona_dir])  # noqa: E731
    return Brain(
        persona_for=persona_for,
        model=LitellmClient(ModelQuirks(), sleep=lambda s: asyncio.sleep(0)),
        tools=default_registry(httpx.AsyncClient()),
        services=ToolServices(knowledge=KnowledgeService(tmp_path / "knowledge", notes=index,
                                                         persona_of=lambda _p: persona_for("tiny-tutor"))),
        log_=SessionLog(tmp_path / "brain.db"),
        usage=UsageLedger(tmp_path / "brain.db"),
        fallback=NotesResponder([persona_dir], index=index),
        settings=BrainSettings(history_tokens=history_tokens),
    )


def turn_for(stub, text="what is photosynthesis?", *, role=Role.LEARNER, arrivals=None, kind=ConversationKind.DIRECT, user="ann"):
    partner = PartnerConfig(id="tutor", name="Tiny Tutor", persona="tiny-tutor",
                            model=ModelSettings(model="openai/stub-model", api_base=stub.api_base, api_key="env:STUB_KEY"))
    message = InboundMessage(
        event_id=EventId("e1"),
        address=Address(channel=ChannelName("webchat"), account=AccountId("default"),
                        conversation=Conversation(chat=ChatId(f"chat-{user}"), kind=kind)),
        sender=Sender(user=UserId(user), display_name=user.title()),
        elements=(Text(text=text),), received_at=datetime.now(UTC), addressed=True,
    )
    pending = list(arrivals or [])
    take = lambda: [pending.pop(0)] if pending else []  # noqa: E731  (one arrival per round boundary)
    return Turn(partner, message.address, message.sender, role, [message], take)


async def run(brain, turn):
    return [event async for event in brain.respond(turn)]


def final(events) -> str:
    return next(e.markdown for e in events if isinstance(e, StreamEnd))


def shown(events) -> str:
    return "".join(e.text for e in events if isinstance(e, StreamDelta)) + final(events)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("STUB_KEY", "sk-test")


async def test_streamed_answer_and_persona_first_system_prompt(stub, tmp_path, persona_dir):
    stub.script(Reply.text("Plants make sugar from light.", chunk=5))
    events = await run(build(tmp_path, persona_dir), turn_for(stub))
    assert final(events) == "Plants make sugar from light."
    assert sum(isinstance(e, StreamDelta) for e in events) > 1
    assert isinstance(events[-1], TurnEnd)
    system = stub.requests[0]["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are Tiny Tutor.")


async def test_tool_results_feed_the_next_round(stub, tmp_path, persona_dir):
    stub.script(Reply.tool_calls(("knowledge_search", {"query": "photosynthesis"})), Reply.text("It is how plants eat light."))
    events = await run(build(tmp_path, persona_dir), turn_for(stub))
    assert final(events) == "It is how plants eat light."
    tool_messages = [m for m in stub.requests[1]["messages"] if m["role"] == "tool"]
    assert "carbon dioxide" in tool_messages[0]["content"]


async def test_round_budget_then_wrap_up_then_forced_finish_without_tools(stub, tmp_path, persona_dir):
    always_tools = [Reply.tool_calls(("knowledge_search", {"query": f"q{i}"})) for i in range(3)]
    stub.script(*always_tools, Reply.text("Here is my answer."))
    events = await run(build(tmp_path, persona_dir), turn_for(stub))
    assert final(events) == "Here is my answer."
    assert len(stub.requests) == 4  # max_rounds 2 + settle 1 + forced 1
    assert any(WRAP_UP in (m.get("content") or "") for m in stub.requests[2]["messages"])
    assert any(FORCED in (m.get("content") or "") for m in stub.requests[3]["messages"])
    assert "tools" in stub.requests[2] and "tools" not in stub.requests[3]


async def test_output_cut_by_the_length_limit_continues(stub, tmp_path, persona_dir):
    stub.script(Reply.truncated("Photosynthesis turns light "), Reply.text("into sugar."))
    events = await run(build(tmp_path, persona_dir), turn_for(stub))
    assert final(events) == "Photosynthesis turns light into sugar."
    assert len(stub.requests) == 2


async def test_an_empty_answer_gets_one_nudge_then_an_apology(stub, tmp_path, persona_dir):
    stub.script(Reply.empty(), Reply.text("Sorry, here it is."))
    assert final(await run(build(tmp_path, persona_dir), turn_for(stub))) == "Sorry, here it is."
    stub.script(Reply.empty(), Reply.empty())
    assert final(await run(build(tmp_path, persona_dir), turn_for(stub, user="bob"))) == APOLOGY


async def test_a_chinese_persona_apologises_in_chinese(stub, tmp_path, persona_dir):
    spec_path = persona_dir / "tiny-tutor" / "persona.yaml"
    spec = yaml.safe_load(spec_path.read_text())
    spec["languages"] = ["zh-Hans"]
    spec_path.write_text(yaml.safe_dump(spec))
    stub.script(Reply.empty(), Reply.empty())
    answer = final(await run(build(tmp_path, persona_dir), turn_for(stub)))
    assert answer == say(Phrase.MODEL_APOLOGY, "zh-Hans") and answer != APOLOGY


async def test_reasoning_is_logged_never_shown(stub, tmp_path, persona_dir):
    brain = build(tmp_path, persona_dir)
    stub.script(Reply.think("the learner seems unsure", "Let's start with light.", chunk=3))
    events = await run(brain, turn_for(stub))
    assert "unsure" not in shown(events) and final(events) == "Let's start with light."
    said = [e.event for e in await brain.log.read("webchat:default:chat-ann") if isinstance(e.event, AssistantSaid)]
    assert said[0].reasoning == "the learner seems unsure"


async def test_models_without_native_tools_use_the_text_protocol_hidden_from_the_learner(tmp_path, persona_dir):
    async with ModelStub(rejects=("tools",)) as stub:
        stub.script(
            Reply.markup_tool_call("knowledge_search", {"query": "photosynthesis"}, before="Let me check. "),
            Reply.text("Plants use light, water and CO2."),
        )
        events = await run(build(tmp_path, persona_dir), turn_for(stub))
        assert final(events) == "Plants use light, water and CO2."
        assert "<tool_call>" not in shown(events)
        assert "tools" not in stub.requests[-1]
        assert "carbon dioxide" in str(stub.requests[-1]["messages"])


async def test_a_message_arriving_mid_turn_joins_at_the_next_round_boundary(stub, tmp_path, persona_dir):
    later = turn_for(stub, "and why is it green?").messages[0].model_copy(update={"event_id": EventId("e2")})
    stub.script(Reply.tool_calls(("knowledge_search", {"query": "photosynthesis"})), Reply.text("Both answered."))
    events = await run(build(tmp_path, persona_dir), turn_for(stub, arrivals=[later]))
    assert final(events) == "Both answered."
    users = [m["content"] for m in stub.requests[1]["messages"] if m["role"] == "user"]
    assert users[-1] == "and why is it green?"


async def test_daily_budget_ends_with_a_friendly_message_and_no_model_call(stub, tmp_path, persona_dir):
    brain = build(tmp_path, persona_dir, budget=1)
    stub.script(Reply.text("first answer", usage={"prompt_tokens": 50, "completion_tokens": 5}))
    await run(brain, turn_for(stub))
    events = await run(brain, turn_for(stub, "again"))
    assert final(events) == BUDGET_LEARNER and len(stub.requests) == 1


TROUBLE = TROUBLE_NOTICE.strip("_")


async def test_a_model_that_stays_down_answers_from_the_notes_saying_so_not_the_error(stub, tmp_path, persona_dir):
    stub.script(*(Reply.server_error(503) for _ in range(6)))
    events = await run(build(tmp_path, persona_dir), turn_for(stub))
    answer = final(events)
    assert TROUBLE in answer.splitlines()[0] and "Photosynthesis" in answer
    assert "503" not in shown(events) and "For my teacher" not in answer
    assert len(stub.requests) == 2 and stub.pending == 4  # one retry, no backup configured
    ended = [e.event for e in await build(tmp_path, persona_dir).log.read("webchat:default:chat-ann")
             if isinstance(e.event, TurnEnded)]
    assert ended[-1].outcome == "model_unavailable"


def with_deadlines(turn, stub, *, backup: bool, first_token: float = 0.5):
    """The turn's partner with deadlines short enough for a test (and a backup on the same stub).

    0.5 s only where the stub never answers; a deadline the stub must meet gets seconds (a loaded machine)."""
    quick = {"first_token_timeout_s": first_token, "timeout_s": 10}
    model = turn.partner.model.model_copy(update={
        **quick, "backup": turn.partner.model.model_copy(update={**quick, "model": "openai/backup-model"}) if backup else None,
    })
    return dataclasses.replace(turn, partner=turn.partner.model_copy(update={"model": model}))


async def test_a_hanging_model_and_backup_end_in_the_notes_after_two_tries_each(stub, tmp_path, persona_dir):
    stub.script(*[Reply.hung()] * 4, Reply.text("never asked"))
    events = await run(build(tmp_path, persona_dir), with_deadlines(turn_for(stub), stub, backup=True))
    answer = final(events)
    assert TROUBLE in answer and "Photosynthesis" in answer
    assert [r["model"] for r in stub.requests] == ["stub-model", "stub-model", "backup-model", "backup-model"]


async def test_an_answer_that_stalls_keeps_what_was_shown_and_says_it_broke_off(stub, tmp_path, persona_dir):
    stub.script(Reply.stalled("Plants make sugar from light and then", chunk=16, after=2), Reply.text("never asked"))
    events = await run(build(tmp_path, persona_dir), with_deadlines(turn_for(stub), stub, backup=True, first_token=2))
    previews = "".join(e.text for e in events if isinstance(e, StreamDelta))
    assert previews == "Plants make suga"
    assert final(events) == f"{previews}\n\n{BROKE_OFF}"  # the preview stays the answer's beginning
    assert len(stub.requests) == 1 and stub.pending == 1  # nothing asked again once the learner saw text


async def test_a_summary_that_times_out_sends_the_turn_to_the_notes_at_once(stub, tmp_path, persona_dir):
    brain = build(tmp_path, persona_dir, history_tokens=60)
    for number in range(3):
        stub.script(Reply.text(f"answer {number} " + "about plants and light " * 8))
        await run(brain, turn_for(stub, f"question {number} " + "tell me more about plants " * 8))
    asked = len(stub.requests)
    stub.script(*[Reply.hung()] * 4, Reply.text("never asked"))
    events = await run(brain, with_deadlines(turn_for(stub, "what is photosynthesis?"), stub, backup=True))
    assert TROUBLE in final(events)
    summaries = [r for r in stub.requests[asked:] if r["messages"][0]["content"] == SUMMARIZE]
    assert len(summaries) == len(stub.requests) - asked == 4  # the summary's four tries, then no turn request


async def test_strangers_lose_tools_and_the_reasons_are_logged(stub, tmp_path, persona_dir):
    brain = build(tmp_path, persona_dir)
    stub.script(Reply.text("hello"))
    await run(brain, turn_for(stub, role=Role.STRANGER))
    names = {t["function"]["name"] for t in stub.requests[0]["tools"]}
    assert "memory_write" not in names and "knowledge_search" in names and "handoff_to_teacher" in names
    started = next(e.event for e in await brain.log.read("webchat:default:chat-ann") if isinstance(e.event, TurnStarted))
    assert started.removed_tools["memory_write"].startswith("house rule")


async def test_an_unaddressed_group_turn_gets_no_tools(stub, tmp_path, persona_dir):
    brain = build(tmp_path, persona_dir)
    turn = turn_for(stub, kind=ConversationKind.GROUP)
    turn.messages[0] = turn.messages[0].model_copy(update={"addressed": False})
    stub.script(Reply.text("hi all"))
    await run(brain, turn)
    assert "tools" not in stub.requests[0]


async def test_a_cancelled_turn_is_logged_as_stopped(stub, tmp_path, persona_dir):
    brain = build(tmp_path, persona_dir)
    stub.script(Reply.text("a very long answer " * 20, chunk=4, pause=0.05))
    task = asyncio.create_task(run(brain, turn_for(stub)))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    ended = [e.event for e in await brain.log.read("webchat:default:chat-ann") if isinstance(e.event, TurnEnded)]
    assert [e.outcome for e in ended] == ["stopped"]


async def test_no_model_configured_answers_from_notes(stub, tmp_path, persona_dir):
    brain = build(tmp_path, persona_dir)
    turn = turn_for(stub)
    turn.partner = turn.partner.model_copy(update={"model": None})
    events = await run(brain, turn)
    assert "No language model is configured" in final(events) and stub.requests == []


async def test_history_past_the_budget_is_summarized_by_the_model(stub, tmp_path, persona_dir):
    brain = build(tmp_path, persona_dir, history_tokens=200)
    for i in range(3):
        stub.script(Reply.text(f"answer {i} " + "about light " * 40))
        await run(brain, turn_for(stub, f"question {i} " + "and more " * 30))
    summary_requests = [r for r in stub.requests if r["messages"][0]["content"] == SUMMARIZE]
    assert summary_requests, "the model was asked to summarize"
    summaries = [e.event for e in await brain.log.read("webchat:default:chat-ann") if isinstance(e.event, Summarized)]
    assert summaries
    last = stub.requests[-1]["messages"]
    assert "Earlier in this conversation (summary)" in last[1]["content"]
