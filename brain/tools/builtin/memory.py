"""``memory_read`` and ``memory_write``: what the partner remembers, scoped by the turn.

Scope is never an argument.  :func:`memory_scope` reads it from the turn:
in a direct conversation it is the person speaking; in a group it is the
group (every thread of one chat shares it).  A scope also names the partner,
channel and account, so two partners -- or two bots of one platform, whose
user ids may differ per app -- never share memory.  The tools' argument
models reject unknown fields, so a model that tries ``{"user": "bob"}`` gets
a validation error, not Bob's memories.

:class:`MemoryGates` is the seam to the memory service.  :class:`InMemoryGates`
is the reference implementation (process memory, lost on restart) used until
that service lands; its behaviour is the contract: reads never cross scopes,
and writing a fact already held in the scope changes nothing and reports the
entry that was there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Literal, Protocol

from pydantic import Field

from brain.tools.base import Tool, ToolArguments, ToolContext, ToolResult
from gateway.messages import ConversationKind
from gateway.turns import Turn

KEY_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"


@dataclass(frozen=True)
class MemoryScope:
    partner: str
    channel: str
    account: str
    kind: Literal["person", "group"]
    id: str
    """The person's user id, or the group's chat id."""


@dataclass(frozen=True)
class MemoryEntry:
    text: str
    key: str | None = None
    """An optional topic label (``exam_date``) that ``read(key=...)`` finds exactly."""
    created_at: datetime | None = None
    """Set by the gates when the entry is stored."""


@dataclass(frozen=True)
class WriteResult:
    created: bool
    existing: MemoryEntry | None = None
    """When ``created`` is False: the entry already holding this fact."""


class MemoryGates(Protocol):
    async def read(
        self, scope: MemoryScope, *, query: str | None = None, key: str | None = None, limit: int = 10
    ) -> list[MemoryEntry]:
        """Entries of ``scope`` only: by exact ``key``, by ``query`` relevance, or newest first."""
        ...

    async def write(self, scope: MemoryScope, entry: MemoryEntry) -> WriteResult:
        """Store ``entry`` in ``scope`` unless the same fact is there; idempotent."""
        ...


def memory_scope(turn: Turn) -> MemoryScope:
    conversation = turn.address.conversation
    group = conversation.kind is ConversationKind.GROUP
    return MemoryScope(
        partner=turn.partner.id,
        channel=turn.address.channel,
        account=turn.address.account,
        kind="group" if group else "person",
        id=conversation.chat if group else turn.sender.user,
    )


def _normal(text: str) -> str:
    return " ".join(text.casefold().split())


def _terms(text: str) -> set[str]:
    return {word for word in re.findall(r"\w+", text.casefold()) if len(word) > 1}


class InMemoryGates:
    """Reference :class:`MemoryGates`: scoped, idempotent, in process memory."""

    def __init__(self, clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self._clock = clock
        self._entries: dict[MemoryScope, list[MemoryEntry]] = {}

    async def read(
        self, scope: MemoryScope, *, query: str | None = None, key: str | None = None, limit: int = 10
    ) -> list[MemoryEntry]:
        newest_first = list(reversed(self._entries.get(scope, [])))
        if key is not None:
            newest_first = [e for e in newest_first if e.key == key]
        if query:
            wanted = _terms(query)
            scored = [(len(wanted & _terms(f"{e.key or ''} {e.text}")), e) for e in newest_first]
            scored.sort(key=lambda pair: -pair[0])  # stable: ties stay newest first
            newest_first = [e for score, e in scored if score]
        return newest_first[:limit]

    async def write(self, scope: MemoryScope, entry: MemoryEntry) -> WriteResult:
        held = self._entries.setdefault(scope, [])
        for existing in held:
            if _normal(existing.text) == _normal(entry.text):
                return WriteResult(created=False, existing=existing)
        held.append(replace(entry, created_at=entry.created_at or self._clock()))
        return WriteResult(created=True)


def _whose(scope: MemoryScope) -> str:
    return "this group" if scope.kind == "group" else "this person"


def _line(entry: MemoryEntry) -> str:
    label = f"[{entry.key}] " if entry.key else ""
    when = f" (noted {entry.created_at:%Y-%m-%d})" if entry.created_at else ""
    return f"- {label}{entry.text}{when}"


class MemoryReadTool(Tool):
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
        scope = memory_scope(context.turn)
        entries = await context.services.memory.read(scope, query=args.query, key=args.key, limit=args.limit)
        if not entries:
            return ToolResult(text=f"Nothing noted about {_whose(scope)} matches.")
        return ToolResult(text=f"Noted about {_whose(scope)}:\n" + "\n".join(_line(e) for e in entries[: args.limit]))


class MemoryWriteTool(Tool):
    name = "memory_write"
    description = (
        "Note one short fact worth remembering about the person you are talking with (in a direct chat) "
        "or about this group (in a group chat), e.g. their goal or an exam date. Writing the same fact twice is harmless."
    )

    class Arguments(ToolArguments):
        text: str = Field(min_length=1, max_length=500, description="The fact, in one sentence.")
        key: str | None = Field(default=None, pattern=KEY_PATTERN, description="Optional topic key, e.g. exam_date.")

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        if context.services.memory is None:
            return ToolResult.error("Memory is not available for this tutor; nothing was noted.")
        scope = memory_scope(context.turn)
        result = await context.services.memory.write(scope, MemoryEntry(text=args.text, key=args.key))
        if result.created:
            return ToolResult(text=f"Noted about {_whose(scope)}.")
        if result.existing is not None:
            return ToolResult(text=f"Already noted about {_whose(scope)}:\n{_line(result.existing)}")
        return ToolResult(text=f"Already noted about {_whose(scope)}.")
