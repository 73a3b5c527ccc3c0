"""``memory_read`` and ``memory_write``: what the partner remembers, scoped by the turn.

Scope is never an argument.  The tools hand the memory service the *turn*,
and the service computes whose memory that is in one place
(``brain.memory.scopes``): in a direct conversation the person speaking,
on whichever linked channel; in a group the group.  The tools' argument
models reject unknown fields, so a model that tries ``{"user": "bob"}`` gets
a validation error, not Bob's memories.

:class:`~brain.tools.services.MemoryGates` is the seam to the memory service
(``brain.memory.service.MemoryService``).  Its contract: reads never leave
the turn's readable scopes; a fact or preference already held is not written
again and the entry that was there is reported.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brain.tools.base import Tool, ToolArguments, ToolContext, ToolResult
from brain.tools.services import MemoryEntry
from gateway.core.messages import ConversationKind
from gateway.core.turns import Turn

KEY_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"


def _whose(turn: Turn) -> str:
    return "this group" if turn.address.conversation.kind is ConversationKind.GROUP else "this person"


def _line(entry: MemoryEntry) -> str:
    label = f"[{entry.key}] " if entry.key else ""
    kind = " (preference)" if entry.kind == "preference" else ""
    when = f" (noted {entry.created_at:%Y-%m-%d})" if entry.created_at else ""
    return f"- {label}{entry.text}{kind}{when}"


class MemoryReadTool(Tool["MemoryReadTool.Arguments"]):
    name = "memory_read"
    description = (
        "Recall what you noted earlier about the person you are talking with (in a direct chat) "
        "or about this group (in a group chat). Give a query or an exact key, or neither for the newest notes."
    )

    class Arguments(ToolArguments):
        query: str | None = Field(default=None, max_length=200, description="Words to look for.")
        key: str | None = Field(default=None, pattern=KEY_PATTERN, description="An exact topic key, e.g. exam_date.")
        limit: int = Field(default=5, ge=1, le=20)

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        if context.services.memory is None:
            return ToolResult.error("Memory is not available for this tutor. Answer without it.")
        entries = await context.services.memory.read(context.turn, query=args.query, key=args.key, limit=args.limit)
        whose = _whose(context.turn)
        if not entries:
            return ToolResult(text=f"Nothing noted about {whose} matches.")
        return ToolResult(text=f"Noted about {whose}:\n" + "\n".join(_line(e) for e in entries[: args.limit]))


class MemoryWriteTool(Tool["MemoryWriteTool.Arguments"]):
    name = "memory_write"
    description = (
        "Note one short fact worth remembering about the person you are talking with (in a direct chat) "
        "or about this group (in a group chat), e.g. their goal or an exam date. Use kind 'preference' for how "
        "they like to learn (pace, language, examples); a preference with the same key replaces the old one. "
        "Writing the same thing twice is harmless."
    )

    class Arguments(ToolArguments):
        text: str = Field(min_length=1, max_length=500, description="The fact, in one sentence.")
        key: str | None = Field(default=None, pattern=KEY_PATTERN, description="Optional topic key, e.g. exam_date.")
        kind: Literal["fact", "preference"] = Field(default="fact", description="fact (default) or preference.")

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        if context.services.memory is None:
            return ToolResult.error("Memory is not available for this tutor; nothing was noted.")
        result = await context.services.memory.write(context.turn, MemoryEntry(text=args.text, key=args.key, kind=args.kind))
        whose = _whose(context.turn)
        if result.refused:
            return ToolResult.error(f"Nothing was noted: {result.refused}.")
        if result.replaced is not None:
            return ToolResult(text=f"Noted about {whose}, replacing:\n{_line(result.replaced)}")
        if result.created:
            return ToolResult(text=f"Noted about {whose}.")
        if result.existing is not None:
            return ToolResult(text=f"Already noted about {whose}:\n{_line(result.existing)}")
        return ToolResult(text=f"Already noted about {whose}.")
