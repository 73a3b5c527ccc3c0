"""Tool subtraction as a table: context in, surface and removal reasons out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from brain.tools.surface import HOUSE_RULES, UNADDRESSED, SurfaceContext, ToolRule, tool_surface
from gateway.core.config import PartnerConfig
from gateway.core.messages import Address, Conversation, ConversationKind, InboundMessage, Sender, Text
from gateway.core.turns import Role, Turn

DIRECT, GROUP = ConversationKind.DIRECT, ConversationKind.GROUP
ALL = frozenset(
    {"knowledge_search", "memory_read", "memory_write", "schedule_reminder", "handoff_to_teacher", "fetch_page"}
)
RULES = [
    ToolRule(channel="email", remove=["schedule_reminder"]),
    ToolRule(kind="group", remove=["memory_write"]),
    ToolRule(group="-100", remove=["knowledge_search", "fetch_page"]),
    ToolRule(kind="direct", role="learner", remove=["fetch_page"]),
]
HOUSE = "house rule 1: role stranger"


def ctx(role: Role, kind: ConversationKind = DIRECT, *, channel="telegram", group=None, addressed=True):
    return SurfaceContext(channel=channel, kind=kind, role=role, group_chat=group, addressed=addressed)


TABLE = [
    ("owner-dm", ctx(Role.OWNER), {}),
    ("learner-dm", ctx(Role.LEARNER), {"fetch_page": "rule 4: direct, role learner"}),
    (
        "stranger-dm",
        ctx(Role.STRANGER),
        {"memory_write": HOUSE, "schedule_reminder": HOUSE, "fetch_page": HOUSE, "handoff_to_teacher": HOUSE},
    ),
    (
        "learner-dm-email",
        ctx(Role.LEARNER, channel="email"),
        {"schedule_reminder": "rule 1: channel email", "fetch_page": "rule 4: direct, role learner"},
    ),
    ("learner-dm-unaddressed-flag", ctx(Role.LEARNER, addressed=False), {"fetch_page": "rule 4: direct, role learner"}),
    ("learner-group", ctx(Role.LEARNER, GROUP, group="-200"), {"memory_write": "rule 2: group"}),
    (
        "learner-group-100",
        ctx(Role.LEARNER, GROUP, group="-100"),
        {"memory_write": "rule 2: group", "knowledge_search": "rule 3: group -100", "fetch_page": "rule 3: group -100"},
    ),
    (
        "stranger-group-100",
        ctx(Role.STRANGER, GROUP, group="-100"),
        {
            "memory_write": HOUSE,
            "schedule_reminder": HOUSE,
            "fetch_page": HOUSE,
            "handoff_to_teacher": HOUSE,
            "knowledge_search": "rule 3: group -100",
        },
    ),
    ("owner-group-unaddressed", ctx(Role.OWNER, GROUP, group="-200", addressed=False), {t: UNADDRESSED for t in ALL}),
]


@pytest.mark.parametrize(("context", "removed"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
def test_surface_table(context, removed):
    surface = tool_surface(ALL, (), RULES, context)
    assert surface.removed == removed
    assert surface.tools == ALL - removed.keys()


def test_forced_tools_survive_house_and_partner_rules():
    rules = [ToolRule(remove=["memory_write", "knowledge_search"])]
    surface = tool_surface(ALL, {"memory_write"}, rules, ctx(Role.STRANGER))
    assert "memory_write" in surface.tools and "memory_write" not in surface.removed
    assert surface.removed["knowledge_search"] == "rule 1: every conversation"


def test_a_forced_tool_need_not_be_listed_as_enabled():
    surface = tool_surface({"memory_read"}, {"handoff_to_teacher"}, [], ctx(Role.LEARNER))
    assert surface.tools == {"memory_read", "handoff_to_teacher"}


def test_an_unaddressed_group_turn_has_no_tools_not_even_forced_ones():
    surface = tool_surface({"memory_read"}, {"handoff_to_teacher"}, [], ctx(Role.OWNER, GROUP, group="g", addressed=False))
    assert surface.tools == frozenset()
    assert surface.removed == {"memory_read": UNADDRESSED, "handoff_to_teacher": UNADDRESSED}


def test_a_rule_naming_a_tool_that_is_not_enabled_removes_nothing():
    surface = tool_surface({"memory_read"}, (), [ToolRule(remove=["fetch_page"])], ctx(Role.LEARNER))
    assert surface.tools == {"memory_read"} and surface.removed == {}


def test_the_first_rule_to_remove_a_tool_is_its_reason():
    rules = [ToolRule(role="learner", remove=["memory_read"]), ToolRule(remove=["memory_read"])]
    assert tool_surface(ALL, (), rules, ctx(Role.LEARNER)).removed == {"memory_read": "rule 1: role learner"}


def test_house_rules_can_be_replaced_for_a_caller_that_needs_none():
    assert tool_surface(ALL, (), [], ctx(Role.STRANGER), house_rules=()).tools == ALL


def test_house_defaults_are_data_and_only_take_from_strangers():
    assert [rule.role for rule in HOUSE_RULES] == ["stranger"]
    for role in (Role.OWNER, Role.LEARNER):
        for kind, group in ((DIRECT, None), (GROUP, "g")):
            assert tool_surface(ALL, (), [], ctx(role, kind, group=group)).tools == ALL


@pytest.mark.parametrize(
    "raw",
    [
        {"add": ["fetch_page"]},
        {"remove": ["memory_write"], "add": ["fetch_page"]},
        {"remove": []},
        {"remove": ["x"], "kind": "direct", "group": "-100"},
        {"remove": ["x"], "role": "teacher"},
    ],
)
def test_rules_can_only_remove(raw):
    with pytest.raises(ValidationError):
        ToolRule.model_validate(raw)


names = st.sampled_from(sorted(ALL))
rules = st.builds(
    ToolRule,
    remove=st.lists(names, min_size=1, max_size=3),
    channel=st.sampled_from([None, "telegram", "email"]),
    kind=st.sampled_from([None, "direct", "group"]),
    role=st.sampled_from([None, "owner", "learner", "stranger"]),
)
contexts = st.builds(
    SurfaceContext,
    channel=st.sampled_from(["telegram", "email"]),
    kind=st.sampled_from([DIRECT, GROUP]),
    role=st.sampled_from(list(Role)),
    group_chat=st.sampled_from([None, "-100"]),
    addressed=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(enabled=st.frozensets(names), forced=st.frozensets(names, max_size=2), rules=st.lists(rules, max_size=4), context=contexts)
def test_rules_never_add_and_forced_stay(enabled, forced, rules, context):
    surface = tool_surface(enabled, forced, rules, context)
    candidates = enabled | forced
    assert surface.tools <= candidates
    assert surface.tools.isdisjoint(surface.removed)
    assert surface.tools | surface.removed.keys() == candidates
    if context.kind is GROUP and not context.addressed:
        assert surface.tools == frozenset()
    else:
        assert forced <= surface.tools
        assert tool_surface(enabled, forced, rules[:-1], context).tools >= surface.tools  # one more rule never adds


def _turn(kind: ConversationKind, *addressed: bool, role=Role.LEARNER) -> Turn:
    address = Address(channel="telegram", account="default", conversation=Conversation(chat="-100", kind=kind))
    sender = Sender(user="alice")
    messages = [
        InboundMessage(
            event_id=f"e{i}", address=address, sender=sender, elements=(Text(text="hi"),),
            received_at=datetime.now(UTC), addressed=flag,
        )
        for i, flag in enumerate(addressed)
    ]  # fmt: skip
    return Turn(partner=PartnerConfig(id="tutor", name="Tutor"), address=address, sender=sender, role=role, messages=messages)


@pytest.mark.parametrize(
    ("kind", "flags", "addressed", "group"),
    [
        (GROUP, (False, True), True, "-100"),
        (GROUP, (False, False), False, "-100"),
        (DIRECT, (False,), True, None),
    ],
)
def test_context_of_a_turn(kind, flags, addressed, group):
    context = SurfaceContext.of(_turn(kind, *flags, role=Role.STRANGER))
    assert (context.channel, context.kind, context.role) == ("telegram", kind, Role.STRANGER)
    assert (context.addressed, context.group_chat) == (addressed, group)


def test_the_record_is_sorted_for_the_turn_log():
    surface = tool_surface(ALL, (), RULES, ctx(Role.STRANGER))
    record = surface.record()
    assert record["tools"] == ["knowledge_search", "memory_read"]
    assert list(record["removed"]) == sorted(record["removed"])
