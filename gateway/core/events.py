"""Typed runtime signals that flow from a responder (the brain) to the outbound path.

A responder yields these while a turn runs.  They are a closed set of typed
events -- never a dict with magic keys -- so every consumer can match on them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.core.messages import Attachment


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StreamDelta(_Event):
    """More text of the answer; the consumer accumulates deltas into a preview."""

    kind: Literal["delta"] = "delta"
    text: str


class StreamEnd(_Event):
    """The answer is complete.  ``markdown`` is the whole final text (deltas are only previews)."""

    kind: Literal["end"] = "end"
    markdown: str
    attachments: tuple[Attachment, ...] = ()


class Progress(_Event):
    """The responder is busy with something visible-worthy (a tool, a search)."""

    kind: Literal["progress"] = "progress"
    label: str


class TurnEnd(_Event):
    """The turn is over.  ``answered`` is False when the responder chose to stay silent."""

    kind: Literal["turn_end"] = "turn_end"
    answered: bool = True
    reason: str = ""


RuntimeEvent = Annotated[StreamDelta | StreamEnd | Progress | TurnEnd, Field(discriminator="kind")]
