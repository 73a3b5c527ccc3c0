"""An answer with nothing visible in it is never "delivered" with nothing sent.

A model (or a hostile prompt steering it) can answer with only control
characters, zero-width spaces, bidi marks or a lone combining mark.  Before,
the renderer dropped the control characters, the delivery path found no parts
and marked the reply delivered: the learner waited for an answer that never
came, and the outbox said all was well.  Other invisible answers went out as
an empty-looking bubble (or were refused by the platform as "message text is
empty").  Now the shared delivery path sends the fixed apology instead, on
every channel, judged by ``gateway.core.messages.has_visible`` after rendering.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from gateway.app import Gateway
from gateway.core.capabilities import capabilities_of
from gateway.pipeline.delivery import APOLOGY
from gateway.pipeline.outbox import reply_key
from gateway.render import render_reply
from gateway.store import ReplyState
from tests.pipeline.conftest import ScriptedResponder, make_config
from tests.pipeline.memory_channel import DEFAULT_CAPS, MemoryChannel

PLATFORMS = ["telegram", "email", "matrix", "webchat", "console"]
INVISIBLE_ANSWERS = {
    "control characters": "\x00\x01\x07\x1b\x7f",
    "zero-width and BOM": "\u200b\u200c\u200d\u2060\ufeff",
    "bidi marks": "\u200e\u200f\u202a\u202c\u2066\u2069",
    "lone combining marks": "\u0301\u0308\u20dd",
    "styled nothing": "**\u200b** _\u2060_\n\n> \u200d",
    "blank letters": "\u3164\u2800 \u115f",
    "whitespace with tabs and form feeds": " \t\x0b\x0c\n\u00a0\u3000",
}

Start = Callable[[str, str], Awaitable[tuple[Gateway, MemoryChannel]]]


@pytest.fixture
async def start(tmp_path) -> AsyncIterator[Start]:
    """A gateway whose in-memory channel declares ``platform``'s real capabilities, answering ``answer``."""
    running: list[Gateway] = []

    async def start_(platform: str, answer: str) -> tuple[Gateway, MemoryChannel]:
        MemoryChannel.caps = capabilities_of(platform)
        gateway = Gateway(make_config(tmp_path / platform), responder=ScriptedResponder(lambda turn: answer),
                          channel_classes={"memory": MemoryChannel})
        await gateway.start()
        running.append(gateway)
        return gateway, gateway.channel("memory", "acct")

    yield start_
    for gateway in running:
        if gateway.ready:
            await gateway.stop()
    MemoryChannel.instances.clear()
    MemoryChannel.caps = DEFAULT_CAPS


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("answer", INVISIBLE_ANSWERS.values(), ids=INVISIBLE_ANSWERS.keys())
def test_an_invisible_answer_renders_to_no_parts(platform: str, answer: str) -> None:
    assert render_reply(answer, capabilities_of(platform)) == []


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("answer", INVISIBLE_ANSWERS.values(), ids=INVISIBLE_ANSWERS.keys())
async def test_an_invisible_answer_is_sent_as_the_apology(start: Start, platform: str, answer: str) -> None:
    gateway, channel = await start(platform, answer)
    message = await channel.inject("what is 7 x 8?")
    await channel.wait_for(lambda sent: any(s.final for s in sent))

    [sent] = channel.sent
    assert APOLOGY in sent.text
    item = await gateway.store.get_reply(reply_key(message.address, message.event_id))
    assert item is not None and item.state is ReplyState.DELIVERED and item.parts_sent == 1


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_visible_answer_is_not_replaced(platform: str) -> None:
    for answer in ("7 x 8 = 56", "\u200b56\u200b", "e\u0301", "\U0001f600", "---\n\nok", "- \u200b"):
        parts = render_reply(answer, capabilities_of(platform))
        assert parts and APOLOGY not in "".join(parts), answer
