"""The built-in tools other than fetch_page, through the registry as the brain calls them."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import httpx
import pytest

from brain.memory.scopes import Scope, ScopeKind
from brain.memory.service import MemoryService
from brain.memory.store import MemoryStore
from brain.session_log import SessionLog
from brain.tools.base import Citation, ToolContext, ToolServices
from brain.tools.builtin import default_registry
from brain.tools.builtin.reminder import parse_when
from brain.tools.services import MemoryEntry, Passage, ScheduleResult
from brain.types import ToolCall
from gateway.core.config import PartnerConfig
from gateway.core.messages import Address, Conversation, ConversationKind, InboundMessage, Sender, Text
from gateway.core.turns import Role, Turn

NOW = datetime(2025, 3, 10, 12, 0, tzinfo=UTC)
EVERY_TOOL = {
    "knowledge_search", "memory_read", "memory_write", "history_search", "schedule_reminder", "handoff_to_teacher", "fetch_page",
}


def make_turn(user: str = "alice", *, group: str | None = None, thread: str | None = None, partner: str = "tutor") -> Turn:
    kind = ConversationKind.GROUP if group else ConversationKind.DIRECT
    conversation = Conversation(chat=group or user, kind=kind, thread=thread)
    address = Address(channel="telegram", account="default", conversation=conversation)
    sender = Sender(user=user)
    message = InboundMessage(
        event_id="e1", address=address, sender=sender, elements=(Text(text="hi"),), received_at=NOW, addressed=True
    )
    return Turn(partner=PartnerConfig(id=partner, name="Tutor"), address=address, sender=sender, role=Role.LEARNER, messages=[message])


def context(turn: Turn, **services: Any) -> ToolContext:
    return ToolContext(partner=turn.partner.id, turn=turn, surface=frozenset(EVERY_TOOL), services=ToolServices(**services))


@pytest.fixture
async def registry():
    async with httpx.AsyncClient(trust_env=False) as http:
        yield default_registry(http, clock=lambda: NOW)


async def run(registry, name: str, arguments: str, ctx: ToolContext):
    return await registry.call(ToolCall(id="c1", name=name, arguments=arguments), ctx)


def test_default_registry_holds_every_builtin_and_fetch_page_is_opt_in(registry):
    assert registry.names == EVERY_TOOL
    assert registry.defaults() == EVERY_TOOL - {"fetch_page"}


# --------------------------------------------------------------------------- knowledge_search


class Library:
    def __init__(self, passages: list[Passage]):
        self.passages, self.asked = passages, []

    async def search(self, partner_id: str, query: str, limit: int) -> list[Passage]:
        self.asked.append((partner_id, query, limit))
        return self.passages


async def test_knowledge_search_returns_numbered_passages_with_citations(registry):
    library = Library([Passage("Fractions", "A fraction is a part.", "unit1.pdf p3"), Passage("Decimals", "x" * 2000, "unit2")])
    args = '{"query": " fractions ", "limit": 2}'
    result = await run(registry, "knowledge_search", args, context(make_turn(partner="maths"), knowledge=library))
    assert library.asked == [("maths", "fractions", 2)]
    assert result.text.startswith("[1] Fractions (unit1.pdf p3)\nA fraction is a part.\n\n[2] Decimals (unit2)\n")
    assert result.text.endswith(" [...]")
    assert result.citations == [Citation("Fractions", "unit1.pdf p3"), Citation("Decimals", "unit2")]


async def test_knowledge_search_with_nothing_found_or_no_service(registry):
    empty = await run(registry, "knowledge_search", '{"query": "rockets"}', context(make_turn(), knowledge=Library([])))
    assert not empty.is_error and "No passages" in empty.text
    missing = await run(registry, "knowledge_search", '{"query": "rockets"}', context(make_turn()))
    assert missing.is_error and "no course material" in missing.text


# --------------------------------------------------------------------------- memory: the gates (the memory service)


@pytest.fixture
def gates(tmp_path):
    """The real memory service on a fresh memory.db, its clock stopped at NOW (order comes from the trace)."""
    service = MemoryService(MemoryStore(tmp_path / "memory.db"), SessionLog(tmp_path / "brain.db"), clock=NOW.timestamp)
    yield service
    service.store.close()
    service.log.close()


async def test_reads_never_cross_scopes(gates):
    await gates.write(make_turn("alice"), MemoryEntry("exam on friday", key="exam"))
    await gates.write(make_turn("alice", group="g1"), MemoryEntry("group works on chapter 3"))
    assert [e.text for e in await gates.read(make_turn("alice"))] == ["exam on friday"]
    assert await gates.read(make_turn("bob")) == []
    assert await gates.read(make_turn("alice", partner="other")) == []  # another partner without owners: another teacher
    assert [e.text for e in await gates.read(make_turn("bob", group="g1"))] == ["group works on chapter 3"]
    assert await gates.read(make_turn("alice", group="alice")) == []  # a group id equal to a user id is still another scope


async def test_a_duplicate_write_reports_the_existing_entry(gates):
    first = await gates.write(make_turn(), MemoryEntry("Likes  chess", key="hobby"))
    again = await gates.write(make_turn(), MemoryEntry("likes chess"))
    assert first.created and first.existing is None
    assert not again.created
    assert again.existing == MemoryEntry("Likes  chess", key="hobby", created_at=NOW)
    assert len(await gates.read(make_turn())) == 1
    assert (await gates.write(make_turn("bob"), MemoryEntry("likes chess"))).created


async def test_reads_by_key_by_query_and_newest_first(gates):
    notes = [("exam on friday", "exam"), ("likes chess", None), ("exam moved to monday", "exam"), ("wants help with algebra exam", None)]
    for text, key in notes:
        await gates.write(make_turn(), MemoryEntry(text, key=key))
    assert [e.text for e in await gates.read(make_turn(), key="exam")] == ["exam moved to monday", "exam on friday"]
    assert [e.text for e in await gates.read(make_turn(), query="chess")] == ["likes chess"]
    assert [e.text for e in await gates.read(make_turn(), query="algebra exam")][0] == "wants help with algebra exam"
    assert [e.text for e in await gates.read(make_turn(), limit=2)] == ["wants help with algebra exam", "exam moved to monday"]


async def test_the_scope_comes_from_the_turn(gates):
    alice = await gates.session(make_turn("alice"))
    assert alice.writable == Scope(ScopeKind.LEARNER, "partner:tutor", alice.person)
    assert (await gates.session(make_turn("alice", group="g1"))).writable == Scope(ScopeKind.GROUP, "partner:tutor", "telegram:default:g1")
    threaded = await gates.session(make_turn("bob", group="g1", thread="t7"))
    assert threaded.writable == Scope(ScopeKind.GROUP, "partner:tutor", "telegram:default:g1")  # threads share the group's
    assert (await gates.session(make_turn("alice", group="g1"))).person == alice.person  # the speaker is still alice


# --------------------------------------------------------------------------- memory: the tools


async def test_a_learner_cannot_read_another_learners_memories(registry, gates):
    args = '{"text": "struggles with fractions", "key": "weak_spot"}'
    wrote = await run(registry, "memory_write", args, context(make_turn("alice"), memory=gates))
    assert not wrote.is_error and wrote.text == "Noted about this person."
    bob = await run(registry, "memory_read", "{}", context(make_turn("bob"), memory=gates))
    assert "struggles" not in bob.text and "Nothing noted" in bob.text
    alice = await run(registry, "memory_read", '{"key": "weak_spot"}', context(make_turn("alice"), memory=gates))
    assert alice.text == "Noted about this person:\n- [weak_spot] struggles with fractions (noted 2025-03-10)"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("memory_read", '{"user": "alice"}'),
        ("memory_read", '{"scope": {"kind": "person", "id": "alice"}}'),
        ("memory_write", '{"text": "x", "learner": "alice"}'),
        ("history_search", '{"query": "exam", "learner": "alice"}'),
    ],
)
async def test_naming_someone_else_is_not_an_argument(registry, gates, name, arguments):
    await gates.write(make_turn("alice"), MemoryEntry("secret of alice"))
    result = await run(registry, name, arguments, context(make_turn("bob"), memory=gates, history=gates))
    assert result.is_error and "is not an argument of this tool" in result.text
    assert "secret" not in result.text


async def test_group_memory_is_the_groups_and_not_a_members(registry, gates):
    await run(registry, "memory_write", '{"text": "we meet on tuesdays"}', context(make_turn("alice", group="g1"), memory=gates))
    in_group = await run(registry, "memory_read", "{}", context(make_turn("bob", group="g1"), memory=gates))
    assert "Noted about this group:\n- we meet on tuesdays" in in_group.text
    in_dm = await run(registry, "memory_read", "{}", context(make_turn("alice"), memory=gates))
    assert "tuesdays" not in in_dm.text


async def test_writing_twice_reports_what_was_there(registry, gates):
    ctx = context(make_turn("alice"), memory=gates)
    await run(registry, "memory_write", '{"text": "goal: pass the B2 exam", "key": "goal"}', ctx)
    again = await run(registry, "memory_write", '{"text": "Goal: pass the B2 exam"}', ctx)
    assert not again.is_error
    assert again.text == "Already noted about this person:\n- [goal] goal: pass the B2 exam (noted 2025-03-10)"


async def test_a_preference_goes_through_the_gate(registry, gates):
    ctx = context(make_turn("alice"), memory=gates)
    first = await run(registry, "memory_write", '{"text": "likes football examples", "key": "examples", "kind": "preference"}', ctx)
    again = await run(registry, "memory_write", '{"text": "Likes football  examples", "kind": "preference"}', ctx)
    changed = await run(registry, "memory_write", '{"text": "likes music examples", "key": "examples", "kind": "preference"}', ctx)
    assert first.text == "Noted about this person."
    assert again.text.startswith("Already noted about this person:\n- [examples] likes football examples (preference)")
    assert changed.text.startswith("Noted about this person, replacing:\n- [examples] likes football examples (preference)")
    assert [e.text for e in await gates.read(make_turn("alice"))] == ["likes music examples"]


async def test_memory_tools_without_a_memory_service(registry):
    result = await run(registry, "memory_write", '{"text": "x"}', context(make_turn()))
    assert result.is_error and "nothing was noted" in result.text
    search = await run(registry, "history_search", '{"query": "x"}', context(make_turn()))
    assert search.is_error and "not available" in search.text


# --------------------------------------------------------------------------- schedule_reminder


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        ("in 5 minutes", NOW + timedelta(minutes=5)),
        ("in 1 minute", NOW + timedelta(minutes=1)),
        ("in an hour", NOW + timedelta(hours=1)),
        ("IN 3  Hours", NOW + timedelta(hours=3)),
        ("in 2 days", NOW + timedelta(days=2)),
        ("in 4 weeks", NOW + timedelta(weeks=4)),
        ("in 30 days", NOW + timedelta(days=30)),
        ("2025-03-10T18:30:00Z", datetime(2025, 3, 10, 18, 30, tzinfo=UTC)),
        ("2025-03-11T09:00+02:00", datetime(2025, 3, 11, 9, 0, tzinfo=timezone(timedelta(hours=2)))),
    ],
)
def test_when_parses(when, expected):
    assert parse_when(when, NOW) == expected


@pytest.mark.parametrize(
    ("when", "why"),
    [
        ("2025-03-10T11:00:00Z", "not in the future"),
        ("in 0 minutes", "not in the future"),
        ("2025-03-10T13:00:00+02:00", "not in the future"),  # 11:00 UTC
        ("in 31 days", "more than 30 days ahead"),
        ("in 5 weeks", "more than 30 days ahead"),
        ("2025-05-01T09:00:00Z", "more than 30 days ahead"),
        ("2025-03-11T09:00:00", "no time zone"),
        ("2025-03-11", "no time zone"),
        ("tomorrow at nine", "not a time I can read"),
        ("in -5 minutes", "not a time I can read"),
        ("in five minutes", "not a time I can read"),
    ],
)
def test_when_refuses(when, why):
    with pytest.raises(ValueError, match=why):
        parse_when(when, NOW)


ACCEPTED = ScheduleResult(accepted=True)


class Calendar:
    def __init__(self, answer: ScheduleResult = ACCEPTED):
        self.answer, self.scheduled = answer, []

    async def schedule(self, address: Address, at: datetime, text: str) -> ScheduleResult:
        self.scheduled.append((address, at, text))
        return self.answer


async def test_a_reminder_goes_to_the_turns_own_conversation(registry):
    calendar, turn = Calendar(), make_turn("alice", group="g1")
    result = await run(registry, "schedule_reminder", '{"when": "in 2 hours", "text": "Quiz time!"}', context(turn, scheduler=calendar))
    assert result.text == "Reminder set for 2025-03-10T14:00+00:00."
    assert calendar.scheduled == [(turn.address, NOW + timedelta(hours=2), "Quiz time!")]


async def test_reminder_refusals_are_errors_and_nothing_is_scheduled(registry):
    calendar = Calendar()
    past = await run(registry, "schedule_reminder", '{"when": "2025-03-01T09:00:00Z", "text": "x"}',
                     context(make_turn(), scheduler=calendar))
    far = await run(registry, "schedule_reminder", '{"when": "in 45 days", "text": "x"}', context(make_turn(), scheduler=calendar))
    assert past.is_error and "not in the future" in past.text
    assert far.is_error and "more than 30 days" in far.text
    assert calendar.scheduled == []
    args = '{"when": "in 1 day", "text": "x", "chat": "g2"}'
    addressed = await run(registry, "schedule_reminder", args, context(make_turn(), scheduler=calendar))
    assert addressed.is_error and "'chat' is not an argument" in addressed.text


async def test_the_schedulers_refusal_reaches_the_model(registry):
    calendar = Calendar(ScheduleResult(accepted=False, reason="this learner already has 10 reminders"))
    result = await run(registry, "schedule_reminder", '{"when": "in 1 day", "text": "x"}', context(make_turn(), scheduler=calendar))
    assert result.is_error and "already has 10 reminders" in result.text
    missing = await run(registry, "schedule_reminder", '{"when": "in 1 day", "text": "x"}', context(make_turn()))
    assert missing.is_error and "not available" in missing.text


# --------------------------------------------------------------------------- handoff_to_teacher


class Desk:
    def __init__(self) -> None:
        self.handed: list[tuple[Address, str, str]] = []

    async def hand_to_teacher(self, address: Address, reason: str, locale: str = "") -> str:
        self.handed.append((address, reason, locale))
        return "Reference H-7."


async def test_handoff_names_the_turns_conversation(registry):
    desk, turn = Desk(), make_turn("alice")
    turn = dataclasses.replace(turn, sender=turn.sender.model_copy(update={"locale": "zh-CN"}))
    result = await run(registry, "handoff_to_teacher", '{"reason": "asks about grades"}', context(turn, handoff=desk))
    assert result.text == "The teacher has been told. Reference H-7."
    assert desk.handed == [(turn.address, "asks about grades", "zh-CN")]  # the locale: the hand-back notice's language
    missing = await run(registry, "handoff_to_teacher", '{"reason": "x"}', context(turn))
    assert missing.is_error
