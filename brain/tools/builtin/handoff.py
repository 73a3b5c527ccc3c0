"""``handoff_to_teacher``: tell the teacher who runs this partner that a human is needed.

The conversation handed over is always the turn's own; the model gives only
the reason, which the teacher reads.
"""

from __future__ import annotations

from pydantic import Field

from brain.tools.base import Tool, ToolArguments, ToolContext, ToolResult


class HandoffTool(Tool["HandoffTool.Arguments"]):
    name = "handoff_to_teacher"
    description = (
        "Ask the human teacher to step in: when the learner asks for a person, is upset or at risk, "
        "or needs something only the teacher can decide. Tell the learner you have done so."
    )

    class Arguments(ToolArguments):
        reason: str = Field(min_length=1, max_length=500, description="What the teacher needs to know, briefly.")

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        if context.services.handoff is None:
            return ToolResult.error("The teacher cannot be reached from here; suggest the learner contacts them directly.")
        turn = context.turn
        confirmation = await context.services.handoff.hand_to_teacher(turn.address, args.reason, turn.sender.locale)
        return ToolResult(text=f"The teacher has been told. {confirmation}".strip())
