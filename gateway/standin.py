"""The plain stand-in responder: lets the pipeline run end to end before the brain lands.

It is a placeholder, not a tutor: it greets, says plainly that no language
model is wired in yet, and quotes back what it is answering, streamed a few
words at a time so previews and edits are exercised on every channel.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from gateway.events import RuntimeEvent, StreamDelta, StreamEnd, TurnEnd
from gateway.turns import Turn


class StandInResponder:
    name = "stand-in"

    def __init__(self, *, word_delay_s: float = 0.0) -> None:
        self.word_delay_s = word_delay_s

    def compose(self, turn: Turn, extra: list[str]) -> str:
        said = [m.text for m in turn.messages if m.text] + extra
        quoted = "\n".join(f"> {line}" for text in said for line in text.splitlines() or [""])
        return (
            f"Hi, I'm **{turn.partner.name}**. I'm running without a language model for now, "
            f"so I can't really answer yet. You said:\n\n{quoted}"
        )

    async def respond(self, turn: Turn) -> AsyncIterator[RuntimeEvent]:
        extra = [m.text for m in turn.take_arrivals()]
        text = self.compose(turn, extra)
        words = text.split(" ")
        for i, word in enumerate(words):
            yield StreamDelta(text=word if i == 0 else " " + word)
            if self.word_delay_s:
                await asyncio.sleep(self.word_delay_s)
        yield StreamEnd(markdown=text)
        yield TurnEnd()
