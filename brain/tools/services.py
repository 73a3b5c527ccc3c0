"""The services behind the built-in tools, as the tools see them: one Protocol each, and the data they return.

The tool contract (:mod:`brain.tools.base`) hands these to every tool in
:class:`~brain.tools.base.ToolServices`; the built-in tools
(:mod:`brain.tools.builtin`) call them; the brain's services (memory, knowledge,
history, reminders, the teacher hand-off) implement them.  Keeping them here,
beside the contract rather than inside the tools that use them, lets the
contract name every service without importing a single built-in tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from gateway.core.messages import Address
from gateway.core.turns import Turn


@dataclass(frozen=True)
class Passage:
    title: str
    text: str
    source: str
    """Where the passage lives: a URL, or a document name and page."""


class KnowledgeSearch(Protocol):
    async def search(self, partner_id: str, query: str, limit: int) -> list[Passage]:
        """The best passages for ``query`` in this partner's material, best first."""
        ...

@dataclass(frozen=True)
class MemoryEntry:
    text: str
    key: str | None = None
    """An optional topic label (``exam_date``) that ``read(key=...)`` finds exactly."""
    kind: Literal["fact", "preference"] = "fact"
    created_at: datetime | None = None
    """Set by the service when the entry is stored."""


@dataclass(frozen=True)
class WriteResult:
    created: bool
    existing: MemoryEntry | None = None
    """When ``created`` is False: the entry already holding this fact."""
    replaced: MemoryEntry | None = None
    """A preference of the same topic that this one replaced."""
    refused: str | None = None
    """Why nothing was written, when the service refused (not a duplicate)."""


class MemoryGates(Protocol):
    async def read(self, turn: Turn, *, query: str | None = None, key: str | None = None, limit: int = 10) -> list[MemoryEntry]:
        """Entries of the turn's own scope only: by exact ``key``, by ``query`` relevance, or newest first."""
        ...

    async def write(self, turn: Turn, entry: MemoryEntry) -> WriteResult:
        """Store ``entry`` in the turn's writable scope unless it is held already; idempotent."""
        ...

@dataclass(frozen=True)
class HistoryHit:
    at: datetime
    speaker: str
    """Who said it: the learner's display name, or "you" for the partner's own words."""
    text: str


class HistorySearch(Protocol):
    async def search_history(self, turn: Turn, query: str, limit: int) -> list[HistoryHit]:
        """Messages of the turn's own history matching ``query``, best first; the current turn left out."""
        ...

@dataclass(frozen=True)
class ScheduleResult:
    accepted: bool
    reason: str = ""
    """Why a reminder was not accepted (quota, conversation closed); shown to the model."""


class Scheduler(Protocol):
    async def schedule(self, address: Address, at: datetime, text: str) -> ScheduleResult:
        """Send ``text`` to ``address`` at ``at`` (timezone-aware)."""
        ...

class Handoff(Protocol):
    async def hand_to_teacher(self, address: Address, reason: str, locale: str = "") -> str:
        """Notify the teacher; return a short confirmation to pass on (e.g. a reference).

        ``locale`` is the learner's platform locale, for what is said to them when the teacher hands back."""
        ...
