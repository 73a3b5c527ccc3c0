"""The kit's long-poll loop on its own: the order fetch -> accept -> cursor, and how it waits on errors.

The "platform" is a list of scripted answers to successive polls; sleeps are
recorded instead of slept, so the waits are asserted exactly.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from channels._kit.longpoll import Batch, poll
from gateway.core.channel import ChannelState
from gateway.core.errors import AuthFailed, PeerUnavailable, RateLimited
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
from gateway.core.retry import RetryPolicy
from tests.fakes import MemoryCursors, RecordingHeartbeat, RecordingSink

POLICY = RetryPolicy(base_delay=1.0, max_delay=4.0, max_attempts=3, jitter=0.0)


def _message(event: str) -> InboundMessage:
    return InboundMessage(
        event_id=EventId(event),
        address=Address(channel=ChannelName("poll"), account=AccountId("main"),
                        conversation=Conversation(chat=ChatId("c1"), kind=ConversationKind.DIRECT)),
        sender=Sender(user=UserId("u1")), elements=(Text(text=f"text {event}"),), received_at=datetime.now(UTC))


class Script:
    """Answers each poll with the next scripted outcome (a batch or an error); then stops the loop."""

    def __init__(self, *outcomes: Batch | Exception) -> None:
        self.outcomes, self.asked = list(outcomes), []

    async def __call__(self, cursor: str | None) -> Batch:
        self.asked.append(cursor)
        if not self.outcomes:
            raise asyncio.CancelledError  # the end of the script: as if the supervisor stopped the account
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


async def _run(script: Script, sink: RecordingSink | None = None, cursors: MemoryCursors | None = None):
    sink, cursors, heartbeat, slept = sink or RecordingSink(), cursors or MemoryCursors(), RecordingHeartbeat(), []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    try:
        await poll(script, sink=sink, cursors=cursors, heartbeat=heartbeat, policy=POLICY, sleep=sleep)
    except asyncio.CancelledError:
        pass
    return sink, cursors, heartbeat, slept


async def test_the_cursor_moves_only_after_the_batch_is_accepted_and_the_next_poll_asks_from_it():
    script = Script(Batch([_message("1"), _message("2")], "3"), Batch([], None), Batch([_message("3")], "4"))
    cursors = MemoryCursors()
    cursors.values["offset"] = "1"
    sink, cursors, heartbeat, slept = await _run(script, cursors=cursors)
    assert script.asked == ["1", "3", "3", "4"]
    assert [m.event_id for m in sink.accepted] == ["1", "2", "3"]
    assert cursors.values["offset"] == "4"
    assert heartbeat.beats >= 3 and heartbeat.events == 2  # every answer showed life; two carried events
    assert slept == []


async def test_a_sink_that_fails_leaves_the_cursor_where_it_was():
    sink = RecordingSink()
    sink.failures = 1
    cursors = MemoryCursors()
    with pytest.raises(OSError):
        await poll(Script(Batch([_message("1")], "2")), sink=sink, cursors=cursors, heartbeat=RecordingHeartbeat(),
                   policy=POLICY)
    assert "offset" not in cursors.values  # the platform hands the batch out again


async def test_a_rate_limit_is_waited_out_as_the_platform_says_and_the_account_stays_running():
    script = Script(RateLimited("poll", 25.0), Batch([_message("1")], "2"))
    sink, _, heartbeat, slept = await _run(script)
    assert sum(slept) == 25.0 and max(slept) <= 10.0  # waited in steps, each a sign of life for the watchdog
    assert ChannelState.CONNECTING not in heartbeat.states
    assert [m.event_id for m in sink.accepted] == ["1"]


async def test_transient_errors_back_off_in_place_then_go_to_the_supervisor():
    unavailable = PeerUnavailable("poll", "503: Service Unavailable", code=503)
    sink, _, heartbeat, slept = await _run(Script(unavailable, Batch([_message("1")], "2")))
    assert len(slept) == 1 and 0 <= slept[0] <= 1.0
    assert heartbeat.states == [ChannelState.CONNECTING, ChannelState.RUNNING]  # said why it waited, then recovered
    with pytest.raises(PeerUnavailable):  # three tries in place (max_attempts), then the supervisor restarts
        await poll(Script(unavailable, unavailable, unavailable), sink=RecordingSink(), cursors=MemoryCursors(),
                   heartbeat=RecordingHeartbeat(), policy=POLICY, sleep=lambda s: asyncio.sleep(0))


async def test_a_permanent_error_goes_to_the_supervisor_at_once():
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    with pytest.raises(AuthFailed):
        await poll(Script(AuthFailed("poll", "401: Unauthorized", code=401)), sink=RecordingSink(),
                   cursors=MemoryCursors(), heartbeat=RecordingHeartbeat(), policy=POLICY, sleep=sleep)
    assert slept == []
