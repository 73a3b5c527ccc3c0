"""What a tool is: a name, a description, an argument model and one coroutine.

The model never chooses *who* a tool acts for.  Everything about the
conversation -- partner, address, sender, role, the tools this turn may use,
the services behind the tools -- arrives in a :class:`ToolContext` built by the
brain from the turn.  Arguments are only what the model may legitimately
vary (a query, a time, a URL), declared as a pydantic model that rejects
unknown fields, so an argument naming someone else is a validation error the
model can read, never a silent widening of scope.

Service handles are Protocols defined beside this contract, in
:mod:`brain.tools.services` (``KnowledgeSearch``, ``MemoryGates``,
``HistorySearch``, ``Scheduler``, ``Handoff``), and travel together as
:class:`ToolServices`; the contract never imports a built-in tool.  A handle left as ``None`` makes its tools
answer with a clear error instead of failing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from brain.tools.services import Handoff, HistorySearch, KnowledgeSearch, MemoryGates, Scheduler
from gateway.core.turns import Turn


class ToolArguments(BaseModel):
    """Base of every tool's ``Arguments``: unknown fields are an error, strings are stripped."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


ArgumentsT = TypeVar("ArgumentsT", bound=ToolArguments)
"""The argument model one tool's ``run`` receives (its nested ``Arguments`` class)."""


@dataclass(frozen=True)
class Citation:
    """Where a piece of a tool's answer came from, for the reply to credit."""

    title: str
    source: str


@dataclass(frozen=True)
class ToolResult:
    """What the model reads back.  ``is_error`` results are still answers, never exceptions."""

    text: str
    citations: list[Citation] = field(default_factory=list)
    is_error: bool = False

    @classmethod
    def error(cls, text: str) -> ToolResult:
        return cls(text=text, is_error=True)


@dataclass(frozen=True)
class ToolServices:
    """The services behind the tools, built once by the composition root and shared by every turn."""

    knowledge: KnowledgeSearch | None = None
    memory: MemoryGates | None = None
    history: HistorySearch | None = None
    scheduler: Scheduler | None = None
    handoff: Handoff | None = None


@dataclass(frozen=True)
class ToolContext:
    """The turn a tool runs for, and the services it may use; never model-supplied."""

    partner: str
    """The partner's id (the turn's ``partner.id``)."""
    turn: Turn
    surface: frozenset[str]
    """The tools this turn may use (``ToolSurface.tools``); the registry refuses any other."""
    services: ToolServices = ToolServices()


class Tool(ABC, Generic[ArgumentsT]):
    """One tool.  Subclasses set the class attributes and implement :meth:`run`.

    A tool is generic over its argument model, so ``run`` can name the fields
    it reads: ``class EchoTool(Tool["EchoTool.Arguments"])``.  The registry
    holds tools of any argument model (a bare ``Tool``).

    ``run`` receives arguments already validated against ``Arguments``.  It may
    return an error result for anything the model can fix or should know
    (a refused URL, a time in the past); it may raise for anything else --
    the registry turns exceptions into a generic error result and logs them.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Arguments: type[ArgumentsT]
    """Set as a nested class; not a ``ClassVar`` only because a ``ClassVar`` cannot name a type variable."""
    timeout_s: ClassVar[float | None] = None
    """Longest a call may run; ``None`` takes the registry's default."""
    default_enabled: ClassVar[bool] = True
    """False for tools a partner must switch on explicitly (``fetch_page``)."""

    @abstractmethod
    async def run(self, args: ArgumentsT, context: ToolContext) -> ToolResult:
        """Do the work for one validated call."""
