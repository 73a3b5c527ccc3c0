"""Access policy: who may talk to a partner, where, and as which role.

Pure decisions over data (the account's :class:`~gateway.core.config.AccessPolicy`,
the partner's owners, approved senders) so they can be tested as a table.
A refusal is not an error: it carries a reason that is logged and counted,
and optionally a short notice for the sender.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from gateway.core.config import AccessPolicy, DmPolicy, GroupPolicy, PartnerConfig
from gateway.core.messages import ConversationKind, InboundMessage, Quote
from gateway.core.turns import Role


class Verdict(str, Enum):
    ADMIT = "admit"
    HOLD = "hold"  # kept until the owner approves the sender (pairing)
    DROP = "drop"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    role: Role = Role.STRANGER
    reason: str = ""
    notify: bool = False
    """Send the refusal notice (subject to its rate limit)."""


def role_of(message: InboundMessage, partner: PartnerConfig, *, authenticated: bool) -> Role:
    """``authenticated``: the message's channel proves who sent it.  Where it does not (web chat),
    a sender id is only a claim, so nobody there is the owner, whatever the config lists --
    the config check refuses such owners too; this is the second lock."""
    if not authenticated:
        return Role.LEARNER
    for owner in partner.owners:
        if owner.channel == message.address.channel and owner.user == message.sender.user:
            return Role.OWNER
    return Role.LEARNER


def decide(
    message: InboundMessage, policy: AccessPolicy, partner: PartnerConfig, *, approved: bool, authenticated: bool
) -> Decision:
    role = role_of(message, partner, authenticated=authenticated)
    if message.address.conversation.kind is ConversationKind.DIRECT:
        return _direct(message, policy, role, approved)
    return _group(message, policy, role)


def _direct(message: InboundMessage, policy: AccessPolicy, role: Role, approved: bool) -> Decision:
    if role is Role.OWNER:
        return Decision(Verdict.ADMIT, Role.OWNER)
    listed = "*" in policy.allow_from or message.sender.user in policy.allow_from
    match policy.dm:
        case DmPolicy.OPEN:
            return Decision(Verdict.ADMIT, Role.LEARNER if listed or approved else Role.STRANGER)
        case DmPolicy.ALLOWLIST:
            if listed or approved:
                return Decision(Verdict.ADMIT, Role.LEARNER)
            return Decision(Verdict.DROP, reason="sender not on the allowlist", notify=True)
        case DmPolicy.PAIRING:
            if listed or approved:
                return Decision(Verdict.ADMIT, Role.LEARNER)
            return Decision(Verdict.HOLD, reason="waiting for the owner to approve the pairing code", notify=True)
        case DmPolicy.DISABLED:
            return Decision(Verdict.DROP, reason="direct messages are disabled", notify=True)
    raise AssertionError(policy.dm)  # pragma: no cover - exhaustive match


def _group(message: InboundMessage, policy: AccessPolicy, role: Role) -> Decision:
    settings = policy.groups.get(message.address.conversation.chat)
    if settings is not None and not settings.enabled:
        return Decision(Verdict.DROP, reason="group disabled")
    mode = (settings.policy if settings and settings.policy else None) or policy.group
    keywords = settings.keywords if settings and settings.keywords is not None else policy.keywords
    replied_to_bot = any(isinstance(e, Quote) and e.is_self for e in message.elements)
    admitted_role = Role.OWNER if role is Role.OWNER else Role.LEARNER
    match mode:
        case GroupPolicy.OFF:
            return Decision(Verdict.DROP, reason="groups are off")
        case GroupPolicy.ALWAYS:
            return Decision(Verdict.ADMIT, admitted_role)
        case GroupPolicy.MENTION:
            if message.addressed or replied_to_bot:
                return Decision(Verdict.ADMIT, admitted_role)
            return Decision(Verdict.DROP, reason="not addressed")
        case GroupPolicy.REPLY:
            if replied_to_bot:
                return Decision(Verdict.ADMIT, admitted_role)
            return Decision(Verdict.DROP, reason="not a reply to the bot")
        case GroupPolicy.KEYWORD:
            text = message.text.casefold()
            if message.addressed or any(k.casefold() in text for k in keywords):
                return Decision(Verdict.ADMIT, admitted_role)
            return Decision(Verdict.DROP, reason="no keyword")
    raise AssertionError(mode)  # pragma: no cover - exhaustive match
