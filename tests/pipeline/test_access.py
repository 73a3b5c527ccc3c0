"""Access policy as a table: context in, verdict and role out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.core.config import AccessPolicy, DmPolicy, GroupPolicy, GroupSettings, OwnerRef, PartnerConfig
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    MessageId,
    Quote,
    Sender,
    Text,
    UserId,
)
from gateway.core.turns import Role
from gateway.pipeline.access import Verdict, decide

PARTNER = PartnerConfig(id="p", name="P", owners=(OwnerRef(channel="relay", user="teacher"),))


def msg(user="u1", kind=ConversationKind.DIRECT, chat="c1", text="hi", addressed=False, reply_to_bot=False):
    elements = [Text(text=text)]
    if reply_to_bot:
        elements.insert(0, Quote(message=MessageId("m0"), is_self=True))
    return InboundMessage(
        event_id=EventId("e"),
        address=Address(channel=ChannelName("relay"), account=AccountId("a"), conversation=Conversation(chat=ChatId(chat), kind=kind)),
        sender=Sender(user=UserId(user)),
        elements=tuple(elements),
        received_at=datetime.now(UTC),
        addressed=addressed,
    )


G = ConversationKind.GROUP
CASES = [
    # (policy, message, approved, verdict, role)
    (AccessPolicy(dm=DmPolicy.PAIRING), msg(user="teacher"), False, Verdict.ADMIT, Role.OWNER),
    (AccessPolicy(dm=DmPolicy.DISABLED), msg(user="teacher"), False, Verdict.ADMIT, Role.OWNER),
    (AccessPolicy(dm=DmPolicy.OPEN), msg(), False, Verdict.ADMIT, Role.STRANGER),
    (AccessPolicy(dm=DmPolicy.OPEN, allow_from=("u1",)), msg(), False, Verdict.ADMIT, Role.LEARNER),
    (AccessPolicy(dm=DmPolicy.ALLOWLIST, allow_from=("u1",)), msg(), False, Verdict.ADMIT, Role.LEARNER),
    (AccessPolicy(dm=DmPolicy.ALLOWLIST, allow_from=("*",)), msg(), False, Verdict.ADMIT, Role.LEARNER),
    (AccessPolicy(dm=DmPolicy.ALLOWLIST), msg(), False, Verdict.DROP, Role.STRANGER),
    (AccessPolicy(dm=DmPolicy.PAIRING), msg(), False, Verdict.HOLD, Role.STRANGER),
    (AccessPolicy(dm=DmPolicy.PAIRING), msg(), True, Verdict.ADMIT, Role.LEARNER),
    (AccessPolicy(dm=DmPolicy.DISABLED), msg(), True, Verdict.DROP, Role.STRANGER),
    (AccessPolicy(), msg(kind=G), False, Verdict.DROP, Role.STRANGER),
    (AccessPolicy(), msg(kind=G, addressed=True), False, Verdict.ADMIT, Role.LEARNER),
    (AccessPolicy(), msg(kind=G, reply_to_bot=True), False, Verdict.ADMIT, Role.LEARNER),
    (AccessPolicy(), msg(kind=G, user="teacher", addressed=True), False, Verdict.ADMIT, Role.OWNER),
    (AccessPolicy(group=GroupPolicy.REPLY), msg(kind=G, addressed=True), False, Verdict.DROP, Role.STRANGER),
    (AccessPolicy(group=GroupPolicy.REPLY), msg(kind=G, reply_to_bot=True), False, Verdict.ADMIT, Role.LEARNER),
    (AccessPolicy(group=GroupPolicy.KEYWORD, keywords=("Homework",)), msg(kind=G, text="my homework?"), False, Verdict.ADMIT, Role.LEARNER),
    (AccessPolicy(group=GroupPolicy.KEYWORD, keywords=("homework",)), msg(kind=G, text="lunch?"), False, Verdict.DROP, Role.STRANGER),
    (AccessPolicy(group=GroupPolicy.ALWAYS), msg(kind=G), False, Verdict.ADMIT, Role.LEARNER),
    (AccessPolicy(group=GroupPolicy.OFF), msg(kind=G, addressed=True), False, Verdict.DROP, Role.STRANGER),
    (AccessPolicy(groups={"c1": GroupSettings(policy=GroupPolicy.ALWAYS)}), msg(kind=G), False, Verdict.ADMIT, Role.LEARNER),
    (AccessPolicy(groups={"c2": GroupSettings(policy=GroupPolicy.ALWAYS)}), msg(kind=G), False, Verdict.DROP, Role.STRANGER),
    (AccessPolicy(group=GroupPolicy.ALWAYS, groups={"c1": GroupSettings(enabled=False)}), msg(kind=G), False, Verdict.DROP, Role.STRANGER),
    (AccessPolicy(group=GroupPolicy.KEYWORD, keywords=("x",), groups={"c1": GroupSettings(keywords=("quiz",))}),
     msg(kind=G, text="quiz time"), False, Verdict.ADMIT, Role.LEARNER),
]


@pytest.mark.parametrize("policy,message,approved,verdict,role", CASES)
def test_access_table(policy, message, approved, verdict, role):
    decision = decide(message, policy, PARTNER, approved=approved, authenticated=True)
    assert decision.verdict is verdict
    if verdict is Verdict.ADMIT:
        assert decision.role is role
    else:
        assert decision.reason


def test_refusals_in_groups_are_silent_and_in_dms_notify():
    assert not decide(msg(kind=G), AccessPolicy(), PARTNER, approved=False, authenticated=True).notify
    assert decide(msg(), AccessPolicy(dm=DmPolicy.ALLOWLIST), PARTNER, approved=False, authenticated=True).notify
