"""``history_search``: find something said earlier in this conversation, beyond the window.

Like the memory tools, the conversation is never an argument: the service
searches the turn's own history -- in a direct chat everything this learner
and this partner said, on any of the learner's linked chat apps; in a group
that group's messages -- and nothing else.  ``{"learner": "ann"}`` is a
validation error, and a query naming Ann only finds what was said *here*.
"""

from __future__ import annotations

from pydantic import Field

from brain.tools.base import Tool, ToolArguments, ToolContext, ToolResult

EXCERPT_CHARS = 300


class HistorySearchTool(Tool["HistorySearchTool.Arguments"]):
    name = "history_search"
    description = (
        "Search what was said earlier in this conversation (in a direct chat: everything you and this learner said, "
        "on any of their linked chat apps; in a group chat: this group's messages). Use it for things older than "
        "what you can see."
    )

    class Arguments(ToolArguments):
        query: str = Field(min_length=1, max_length=200, description="Words to look for.")
        limit: int = Field(default=5, ge=1, le=10)

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        if context.services.history is None:
            return ToolResult.error("Searching the conversation is not available for this tutor.")
        hits = await context.services.history.search_history(context.turn, args.query, args.limit)
        if not hits:
            return ToolResult(text="Nothing said earlier in this conversation matches.")
        lines = []
        for hit in hits[: args.limit]:
            text = hit.text if len(hit.text) <= EXCERPT_CHARS else hit.text[:EXCERPT_CHARS] + " [...]"
            lines.append(f"- {hit.at:%Y-%m-%d %H:%M} {hit.speaker}: {text}")
        return ToolResult(text="Said earlier in this conversation:\n" + "\n".join(lines))
