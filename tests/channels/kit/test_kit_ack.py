"""Durable, then 2xx: the answer waits for the accept, a late accept is counted, a failed one releases its claim."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import pytest
from starlette.responses import JSONResponse

from channels._kit.ack import AckClock
from channels._kit.replay import ReplayMemory
from channels._kit.signatures import Verified
from gateway.core.capabilities import capabilities_of
from gateway.core.errors import ForgedRequest
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    Sender,
    Text,
    UserId,
)
from tests.fakes import RecordingSink
from tests.waits import HANG_S


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowSink(RecordingSink):
    """Takes ``seconds`` of the test's clock to make a batch durable."""

    def __init__(self, clock: Clock, seconds: float) -> None:
        super().__init__()
        self.clock, self.seconds = clock, seconds

    async def accept(self, messages):  # type: ignore[no-untyped-def]
        await super().accept(messages)
        self.clock.now += self.seconds


def message(event: str = "ev-1") -> InboundMessage:
    where = Conversation(chat=ChatId("C1"), kind=ConversationKind.GROUP)
    return InboundMessage(
        event_id=EventId(event), address=Address(channel=ChannelName("slack"), account=AccountId("main"), conversation=where),
        sender=Sender(user=UserId("U1")), elements=(Text(text="hi"),), received_at=datetime.now(UTC),
    )


def test_the_deadline_is_the_platforms_declared_one():
    assert AckClock.of("slack", "main").deadline_s == capabilities_of("slack").ack_deadline_s == 3


async def test_the_answer_waits_until_the_accept_returned():
    sink = RecordingSink()
    sink.gate.clear()
    ack = asyncio.create_task(AckClock("slack", "main", 3).accept_then_answer(sink, [message()]))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not ack.done() and sink.calls == 1  # held open: nothing answered before the write
    sink.gate.set()
    response = await asyncio.wait_for(ack, HANG_S)
    assert response.status_code == 200 and [m.event_id for m in sink.accepted] == ["ev-1"]


async def test_an_accept_slower_than_the_deadline_is_logged_and_counted(caplog: pytest.LogCaptureFixture):
    clock = Clock()
    timer = AckClock("slack", "main", 3, clock=clock)
    quick = SlowSink(clock, 1.0)
    await timer.accept_then_answer(quick, [message("a")])
    assert timer.late == 0 and quick.late_acks == []
    sink = SlowSink(clock, 4.5)
    with caplog.at_level(logging.WARNING, logger="channels._kit.ack"):
        response = await timer.accept_then_answer(sink, [message("b")], JSONResponse({"ok": True}))
    assert response.status_code == 200 and response.body == b'{"ok":true}'  # still answered: it is durable
    assert timer.late == 1 and timer.slowest_s == 4.5
    assert sink.late_acks == [(4.5, 3)]  # the sink heard of it: the gateway counts it on /metrics
    assert "platform=slack account=main took_s=4.500 deadline_s=3" in caplog.text


async def test_a_failed_accept_answers_nothing_and_releases_the_replay_claim():
    replays = ReplayMemory(300)
    replays.claim("sig")
    sink = RecordingSink()
    sink.failures = 1
    with pytest.raises(OSError):
        await AckClock("slack", "main", 3).accept_then_answer(sink, [message()], verified=Verified(1, "sig"),
                                                              replays=replays)
    replays.claim("sig")  # the platform's retry of the same signed request is let through
    with pytest.raises(ForgedRequest):
        replays.claim("sig")


async def test_nothing_to_accept_is_answered_at_once():
    sink = RecordingSink()
    response = await AckClock("feishu", "main", 3).accept_then_answer(sink, [])
    assert response.status_code == 200 and sink.calls == 0
