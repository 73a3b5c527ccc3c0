"""``knowledge_search``: passages from the partner's own course material, with sources.

The search service is a seam (:class:`~brain.tools.services.KnowledgeSearch`); the partner id comes
from the turn, so a model can only ever search the partner it speaks for.
"""

from __future__ import annotations

from pydantic import Field

from brain.tools.base import Citation, Tool, ToolArguments, ToolContext, ToolResult

MAX_PASSAGE_CHARS = 1_500


class KnowledgeSearchTool(Tool["KnowledgeSearchTool.Arguments"]):
    name = "knowledge_search"
    description = (
        "Search the course material this tutor was given. Use it before answering questions about the "
        "course, and cite the passages you use by their [number]."
    )

    class Arguments(ToolArguments):
        query: str = Field(min_length=1, max_length=500, description="What to look for, in a few words.")
        limit: int = Field(default=5, ge=1, le=8, description="How many passages to return (at most 8).")

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        if context.services.knowledge is None:
            return ToolResult.error("This tutor has no course material to search. Answer without it.")
        passages = await context.services.knowledge.search(context.partner, args.query, args.limit)
        passages = passages[: args.limit]
        if not passages:
            return ToolResult(text=f"No passages in the course material match {args.query!r}.")
        blocks = []
        for number, passage in enumerate(passages, 1):
            text = passage.text if len(passage.text) <= MAX_PASSAGE_CHARS else passage.text[:MAX_PASSAGE_CHARS] + " [...]"
            blocks.append(f"[{number}] {passage.title} ({passage.source})\n{text}")
        citations = [Citation(title=p.title, source=p.source) for p in passages]
        return ToolResult(text="\n\n".join(blocks), citations=citations)
