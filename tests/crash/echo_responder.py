"""A zero-latency responder that says which messages it answers.

Plugged into a real ``partners serve`` process with
``PARTNERS_RESPONDER=echo_responder:make_responder`` (``tests/crash`` on
``PYTHONPATH``).  Every reply is ``answering: <text of each message it covers>``,
so a checker can tell from the platform's record alone which inbound
messages a visible reply answers.

``ECHO_DELTA_DELAY`` (seconds, default 0) streams the reply as two deltas with
that pause between them, so streamed previews -- and their edits -- are on the
path the crash test kills.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

from gateway.core.events import RuntimeEvent, StreamDelta, StreamEnd, TurnEnd
from gateway.core.turns import Turn


class EchoResponder:
    name = "echo"

    def __init__(self, delta_delay: float = 0.0) -> None:
        self.delta_delay = delta_delay

    async def respond(self, turn: Turn) -> AsyncIterator[RuntimeEvent]:
        said = [m.text for m in turn.messages]
        if self.delta_delay:
            yield StreamDelta(text="answering:")
            await asyncio.sleep(self.delta_delay)
            said += [m.text for m in turn.take_arrivals()]
            yield StreamDelta(text=" " + " ".join(said))
            await asyncio.sleep(self.delta_delay)
        yield StreamEnd(markdown="answering: " + " ".join(said))
        yield TurnEnd()


def make_responder() -> EchoResponder:
    return EchoResponder(float(os.environ.get("ECHO_DELTA_DELAY", "0")))
