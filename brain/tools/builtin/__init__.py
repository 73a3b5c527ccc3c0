"""The house tools, and one registry holding all of them.

Every built-in is registered; which ones a turn sees is the surface's job
(:mod:`brain.tools.surface`).  ``fetch_page`` is registered but not enabled
by default (``ToolRegistry.defaults()`` leaves it out): a partner turns it on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import httpx

from brain.tools.builtin.fetch import FetchPageTool, Network, Resolver, resolve_host
from brain.tools.builtin.handoff import HandoffTool
from brain.tools.builtin.history import HistorySearchTool
from brain.tools.builtin.knowledge import KnowledgeSearchTool
from brain.tools.builtin.memory import MemoryReadTool, MemoryWriteTool
from brain.tools.builtin.reminder import ScheduleReminderTool
from brain.tools.registry import ToolRegistry

BUILTIN_TOOLS = (
    KnowledgeSearchTool, MemoryReadTool, MemoryWriteTool, HistorySearchTool, ScheduleReminderTool, HandoffTool, FetchPageTool,
)
TOOL_NAMES: frozenset[str] = frozenset(tool.name for tool in BUILTIN_TOOLS)
"""Every built-in tool name, for checking a persona's tool list without building a registry."""


def default_registry(
    http: httpx.AsyncClient,
    *,
    resolver: Resolver = resolve_host,
    allowed_networks: Sequence[Network] = (),
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    timeout_s: float = 30.0,
) -> ToolRegistry:
    """All built-ins.  ``http`` is the client ``fetch_page`` uses (give it one of its own)."""
    return ToolRegistry(
        [
            KnowledgeSearchTool(),
            MemoryReadTool(),
            MemoryWriteTool(),
            HistorySearchTool(),
            ScheduleReminderTool(clock=clock),
            HandoffTool(),
            FetchPageTool(http, resolver=resolver, allowed_networks=allowed_networks),
        ],
        timeout_s=timeout_s,
    )
