"""The seam between the pipeline and whatever writes the answers (the brain).

The pipeline builds a :class:`Turn` -- who is speaking, to which partner,
what they said -- and a :class:`Responder` streams typed runtime events back.
The brain implements ``Responder``; until it lands a plain stand-in does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from gateway.core.config import PartnerConfig, ToolRule
from gateway.core.events import RuntimeEvent
from gateway.core.messages import Address, InboundMessage, Sender


class Role(str, Enum):
    OWNER = "owner"  # the teacher who runs this partner
    LEARNER = "learner"  # someone the access policy lets in
    STRANGER = "stranger"  # anyone else (only reaches a turn where policy is open)


@dataclass
class Turn:
    """One answer's worth of work for one conversation."""

    partner: PartnerConfig
    address: Address
    sender: Sender
    role: Role
    messages: list[InboundMessage]
    take_arrivals: Callable[[], list[InboundMessage]] = field(default=lambda: [])
    """For ``mid_turn: merge`` partners: messages that arrived since the turn began.

    The responder calls it at a round boundary; whatever it returns is part of
    this turn and answered by this turn's reply.  Queue-mode partners get [].
    """

    context_rules: tuple[ToolRule, ...] = ()
    """Tool rules the conversation's own settings add (a group's ``remove_tools``); subtract only."""

    @property
    def text(self) -> str:
        return "\n".join(m.text for m in self.messages if m.text)


class Responder(Protocol):
    def respond(self, turn: Turn) -> AsyncIterator[RuntimeEvent]:
        """Stream the turn's answer as runtime events, ending with ``TurnEnd``."""
        ...
