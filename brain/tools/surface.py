"""Tool subtraction: which tools one turn may use, and why the others are gone.

A turn's surface is the partner's enabled tools (plus its forced ones) minus
what the conversation takes away.  Three sources subtract, in this order, and
the first one to remove a tool is the reason recorded for it:

1. **An unaddressed group message.**  A turn in a group that did not address
   the bot (possible under the ``always`` and ``keyword`` group policies) never
   triggers a tool: its surface is empty, forced tools included.  The answer
   to chatter in a group is words, not actions.
2. **House rules** (:data:`HOUSE_RULES`): strangers lose every tool that acts
   beyond the reply -- writing memory, scheduling, fetching pages, paging the
   teacher.  Nothing else is taken by default; group memory is already scoped
   to the group by the memory tools, so groups need no house rule.
3. **The partner's rules**, in the order written.

Rules can only remove.  :class:`ToolRule` has no field that adds a tool, and
an unknown field is a validation error, so ``add:`` in a config file fails
loudly.  Forced tools survive every rule -- forcing is the only way a partner
keeps a tool a house rule would take -- but not an unaddressed group.

:class:`ToolRule` itself is configuration data and lives in ``gateway.core.config``
(a partner's rules are written in the config file); matching lives here.

.. admonition:: Invariant

   ``tool_surface(...).tools`` is a subset of ``enabled | forced``; it contains
   ``forced`` unless the context is an unaddressed group; every tool of
   ``enabled | forced`` is in exactly one of ``tools`` and ``removed``.
   *Checked by*: ``tests/brain/test_surface.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gateway.core.config import ToolRule
from gateway.core.messages import ConversationKind

__all__ = ["ToolRule", "SurfaceContext", "ToolSurface", "tool_surface", "rule_matches"]

if TYPE_CHECKING:
    from gateway.core.turns import Role, Turn

UNADDRESSED = "group message that did not address the bot"


def rule_matches(rule: ToolRule, context: SurfaceContext) -> bool:
    kind = ConversationKind(context.kind).value
    return (
        (rule.channel is None or rule.channel == context.channel)
        and (rule.kind is None or rule.kind == kind)
        and (rule.role is None or rule.role == _value(context.role))
        and (rule.group is None or (kind == "group" and rule.group == context.group_chat))
    )


HOUSE_RULES: tuple[ToolRule, ...] = (
    ToolRule(role="stranger", remove=("memory_write", "schedule_reminder", "fetch_page", "handoff_to_teacher")),
)
"""Applied before a partner's own rules; see the module docstring for why so few."""


@dataclass(frozen=True)
class SurfaceContext:
    """The facts about a turn that rules match on."""

    channel: str
    kind: ConversationKind
    role: Role
    group_chat: str | None = None
    """The group's chat id; None in a direct conversation."""
    addressed: bool = True
    """Whether the bot was addressed; direct conversations always are."""

    @classmethod
    def of(cls, turn: Turn) -> SurfaceContext:
        """Read the context from a turn: a group turn is addressed if any of its messages was."""
        conversation = turn.address.conversation
        group = conversation.kind is ConversationKind.GROUP
        return cls(
            channel=turn.address.channel,
            kind=conversation.kind,
            role=turn.role,
            group_chat=conversation.chat if group else None,
            addressed=not group or any(m.addressed for m in turn.messages),
        )


@dataclass(frozen=True)
class ToolSurface:
    """The tools one turn may use, and the reason each other enabled tool was removed."""

    tools: frozenset[str]
    removed: dict[str, str]

    def record(self) -> dict[str, Any]:
        """JSON-ready form for the turn's log: sorted tools and reasons."""
        return {"tools": sorted(self.tools), "removed": dict(sorted(self.removed.items()))}


def tool_surface(
    enabled: Iterable[str],
    forced: Iterable[str],
    rules: Sequence[ToolRule],
    context: SurfaceContext,
    *,
    house_rules: Sequence[ToolRule] = HOUSE_RULES,
) -> ToolSurface:
    """Subtract from ``enabled | forced`` what the context takes away.

    Reasons name the rule by its 1-based position: ``rule 2: role stranger``,
    ``house rule 1: role stranger``.
    """
    forced = frozenset(forced)
    candidates = frozenset(enabled) | forced
    if not context.addressed and ConversationKind(context.kind) is ConversationKind.GROUP:
        return ToolSurface(frozenset(), {name: UNADDRESSED for name in sorted(candidates)})
    removed: dict[str, str] = {}
    labelled = [(f"house rule {i}", rule) for i, rule in enumerate(house_rules, 1)]
    labelled += [(f"rule {i}", rule) for i, rule in enumerate(rules, 1)]
    for label, rule in labelled:
        if not rule_matches(rule, context):
            continue
        for name in rule.remove:
            if name in candidates and name not in forced and name not in removed:
                removed[name] = f"{label}: {rule.describe()}"
    return ToolSurface(candidates - removed.keys(), removed)


def _value(role: object) -> str:
    return str(getattr(role, "value", role))
