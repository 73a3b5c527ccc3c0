"""The kit's websocket session on its own, against a small gateway server on loopback.

The server speaks a minimal dialect of the dance every such platform shares:
hello with a heartbeat interval, identify or resume (session id and last
sequence), ready or resumed followed by the events after that sequence, an ack
per event, heartbeats answered.  It records what the client sent, so the tests
assert on the wire: which frames were acknowledged, when, and from where a
session resumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from channels._kit.websocket import NO_AUTH_CLOSES, NO_CLOSE_CODES, SEQUENCE_KEY, SESSION_KEY, Frame, FrameKind, Resume, Session, Wire
from gateway.core.channel import ChannelState
from gateway.core.errors import AuthFailed, InvalidEvent
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
from tests.contract.harness import eventually
from tests.fakes import MemoryCursors, RecordingHeartbeat, RecordingSink
from tests.waits import HANG_S

FAST = RetryPolicy(base_delay=0.01, max_delay=0.05, max_attempts=4, jitter=0.0)


@dataclass
class LoopbackGateway:
    """The platform's side: every event it ever sent, what each connection was told and answered."""

    interval: float = 5.0
    events: list[dict] = field(default_factory=list)
    acks: list[int] = field(default_factory=list)
    hellos: list[dict] = field(default_factory=list)
    """Each connection's first client frame: identify or resume."""
    beats: int = 0
    mute: bool = False
    """Stop answering heartbeats (a connection that died without TCP noticing)."""
    drop_after_ack: int | None = None
    """Close the connection right after this sequence is acknowledged."""
    live: ServerConnection | None = None
    closed: int = 0
    """Connections that have ended; everything their client sent before closing was read."""
    url: str = ""

    async def handle(self, ws: ServerConnection) -> None:
        self.live = ws
        try:
            await ws.send(json.dumps({"op": "hello", "interval": self.interval}))
            first = json.loads(await ws.recv())
            self.hellos.append(first)
            if first["op"] == "resume":
                await ws.send(json.dumps({"op": "resumed"}))
                for event in self.events:
                    if event["seq"] > (first["seq"] or 0):
                        await ws.send(json.dumps(event))
            else:
                await ws.send(json.dumps({"op": "ready", "session": f"s-{len(self.hellos)}"}))
                for event in self.events:
                    if self.drop_after_ack is None or event["seq"] <= self.drop_after_ack:  # the rest after the drop
                        await ws.send(json.dumps(event))
            async for raw in ws:
                frame = json.loads(raw)
                if frame["op"] == "ack":
                    self.acks.append(frame["seq"])
                    if frame["seq"] == self.drop_after_ack:
                        self.drop_after_ack = None
                        await ws.close()
                elif frame["op"] == "beat":
                    self.beats += 1
                    if not self.mute:
                        await ws.send(json.dumps({"op": "beat_ack"}))
        except ConnectionClosed:
            pass
        finally:
            self.closed += 1

    async def publish(self, text: str) -> int:
        event = {"op": "event", "seq": len(self.events) + 1, "id": f"e{len(self.events) + 1}", "text": text}
        self.events.append(event)
        if self.live is not None:
            with contextlib.suppress(ConnectionClosed):
                await self.live.send(json.dumps(event))
        return event["seq"]


class LoopbackProtocol:
    """The channel's side of the dialect: the words only, the session owns the loop."""

    greets = True
    heartbeat_interval = 30.0
    opens_ready = False
    auth_failed_close_codes = NO_AUTH_CLOSES
    identify_again_close_codes = NO_CLOSE_CODES

    def __init__(self, url: str) -> None:
        self.url = url

    async def endpoint(self, resume: Resume | None) -> str:
        return self.url

    def identify(self, resume: Resume | None) -> Wire | None:
        if resume is None:
            return json.dumps({"op": "identify", "token": "t"})
        return json.dumps({"op": "resume", "session": resume.session_id, "seq": resume.sequence})

    def heartbeat(self, sequence: int | None) -> Wire | None:
        return json.dumps({"op": "beat", "seq": sequence})

    def read(self, wire: Wire) -> Frame:
        frame = json.loads(wire)
        op = frame.get("op")
        if op == "hello":
            return Frame(FrameKind.HELLO, heartbeat_interval=frame["interval"])
        if op == "ready":
            return Frame(FrameKind.READY, session_id=frame["session"])
        if op == "resumed":
            return Frame(FrameKind.RESUMED)
        if op == "beat_ack":
            return Frame(FrameKind.HEARTBEAT_ACK)
        if op == "event":
            return Frame(FrameKind.EVENT, sequence=frame["seq"], messages=(_message(frame["id"], frame["text"]),),
                         ack=json.dumps({"op": "ack", "seq": frame["seq"]}))
        raise InvalidEvent(f"loopback frame {op!r} is not one the test speaks")


def _message(event: str, text: str) -> InboundMessage:
    return InboundMessage(
        event_id=EventId(event),
        address=Address(channel=ChannelName("loopback"), account=AccountId("main"),
                        conversation=Conversation(chat=ChatId("c1"), kind=ConversationKind.DIRECT)),
        sender=Sender(user=UserId("u1")),
        elements=(Text(text=text),),
        received_at=datetime.now(UTC),
    )


@dataclass
class Rig:
    server: LoopbackGateway
    sink: RecordingSink
    cursors: MemoryCursors
    heartbeat: RecordingHeartbeat

    def session(self) -> Session:
        return Session(LoopbackProtocol(self.server.url), sink=self.sink, cursors=self.cursors, heartbeat=self.heartbeat,
                       policy=FAST, what="loopback")

    def texts(self) -> list[str]:
        return [m.text for m in self.sink.accepted]


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    server = LoopbackGateway()
    async with serve(server.handle, "127.0.0.1", 0) as listening:
        host, port = next(iter(listening.sockets)).getsockname()[:2]
        server.url = f"ws://{host}:{port}"
        yield Rig(server, RecordingSink(), MemoryCursors(), RecordingHeartbeat())


@contextlib.asynccontextmanager
async def running(session: Session) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(session.run())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_an_event_is_acked_only_after_accept_returned(rig: Rig):
    async with running(rig.session()):
        await eventually(lambda: ChannelState.RUNNING in rig.heartbeat.states, what="the session to be ready")
        rig.sink.gate.clear()  # accept is slow: the store is writing
        await rig.server.publish("hello")
        await eventually(lambda: rig.sink.calls == 1, what="accept to be called")
        assert rig.server.live is not None
        await rig.server.live.close()  # everything the client sent before the close is read by now
        await eventually(lambda: rig.server.closed == 1, what="the first connection to end")
        assert rig.server.acks == []  # not acknowledged while accept had not returned
        rig.sink.gate.set()
        # the ack could not go out on the closed socket: the sequence was not stored, the resume gets it again
        await eventually(lambda: rig.server.acks == [1], what="the event to be acknowledged after the resume")
        assert rig.server.hellos[1] == {"op": "resume", "session": "s-1", "seq": None}
        assert rig.texts() == ["hello"] and rig.sink.calls == 2  # delivered twice, accepted once
        assert rig.heartbeat.events >= 1


async def test_a_socket_dropped_mid_stream_resumes_from_the_saved_sequence(rig: Rig):
    rig.server.drop_after_ack = 2  # the first connection carries two events, then drops
    for text in ("one", "two", "three", "four"):
        await rig.server.publish(text)
    async with running(rig.session()):
        await eventually(lambda: len(rig.sink.accepted) == 4, what="all four events")
        await eventually(lambda: rig.cursors.values.get(SEQUENCE_KEY) == "4", what="the last sequence to be saved")
    assert rig.texts() == ["one", "two", "three", "four"]
    assert [h["op"] for h in rig.server.hellos] == ["identify", "resume"]
    assert rig.server.hellos[1] == {"op": "resume", "session": "s-1", "seq": 2}
    assert rig.server.acks == [1, 2, 3, 4]  # each once: the resume replayed only what was not durable
    assert rig.sink.calls == 4


async def test_a_sink_that_fails_leaves_the_frame_unacked_and_it_is_delivered_again(rig: Rig):
    rig.sink.failures = 1  # the disk is full for the first write
    await rig.server.publish("keep me")
    with pytest.raises(OSError):  # not a platform error: the supervisor's to judge, and it restarts the run
        await asyncio.wait_for(rig.session().run(), 60)
    await eventually(lambda: rig.server.closed == 1, what="the connection to end")
    assert rig.server.acks == [] and SEQUENCE_KEY not in rig.cursors.values
    assert rig.cursors.values[SESSION_KEY] == "s-1"
    async with running(rig.session()):  # the supervisor's restart
        await eventually(lambda: rig.server.acks == [1], what="the redelivered event to be acknowledged")
    assert rig.texts() == ["keep me"]
    assert rig.server.hellos[1] == {"op": "resume", "session": "s-1", "seq": None}


async def test_a_heartbeat_the_server_does_not_answer_means_a_new_connection_that_resumes(rig: Rig):
    rig.server.interval = 0.2
    rig.server.mute = True
    await rig.server.publish("before the silence")
    async with running(rig.session()):
        await eventually(lambda: rig.server.closed >= 1, what="the silent connection to be closed by the client")
        rig.server.mute = False
        await eventually(lambda: len(rig.server.hellos) >= 2, what="a new connection")
        await rig.server.publish("after the silence")
        await eventually(lambda: len(rig.sink.accepted) == 2, what="the event on the new connection")
    assert rig.server.hellos[1] == {"op": "resume", "session": "s-1", "seq": 1}
    assert ChannelState.CONNECTING in rig.heartbeat.states  # the status page said it was reconnecting
    assert rig.heartbeat.states[-1] is ChannelState.RUNNING
    assert rig.heartbeat.beats > rig.server.beats  # every frame, not only the answered heartbeats, showed life


async def test_an_unreadable_frame_is_recorded_and_the_stream_goes_on(rig: Rig):
    async with running(rig.session()):
        await eventually(lambda: ChannelState.RUNNING in rig.heartbeat.states, what="the session to be ready")
        assert rig.server.live is not None
        await rig.server.live.send(json.dumps({"op": "mystery"}))
        await rig.server.publish("still here")
        await eventually(lambda: rig.server.acks == [1], what="the next event")
    assert rig.sink.invalid_reasons and "mystery" in rig.sink.invalid_reasons[0]
    assert rig.texts() == ["still here"]


class TicketProtocol:
    """A platform whose URL carries a one-time ticket: no hello, no identify, no ready (DingTalk's stream)."""

    greets = False
    heartbeat_interval = 30.0
    opens_ready = True
    auth_failed_close_codes = NO_AUTH_CLOSES
    identify_again_close_codes = NO_CLOSE_CODES

    def __init__(self, url: str) -> None:
        self.url = url

    async def endpoint(self, resume: Resume | None) -> str:
        return self.url

    def identify(self, resume: Resume | None) -> Wire | None:
        return None

    def heartbeat(self, sequence: int | None) -> Wire | None:
        return None

    def read(self, wire: Wire) -> Frame:
        frame = json.loads(wire)
        ack = json.dumps({"ack": frame["id"]})
        if frame.get("text") is None:  # an envelope with nothing readable inside: acked, recorded
            return Frame(FrameKind.EVENT, ack=ack, invalid=f"frame {frame['id']} has no text")
        return Frame(FrameKind.EVENT, messages=(_message(frame["id"], frame["text"]),), ack=ack)


async def test_a_ticket_socket_is_running_once_open_and_an_unreadable_frame_is_still_acked():
    acks: list[str] = []
    opened = asyncio.Event()

    async def handle(ws: ServerConnection) -> None:
        opened.set()
        await ws.send(json.dumps({"id": "f1"}))
        await ws.send(json.dumps({"id": "f2", "text": "hi"}))
        with contextlib.suppress(ConnectionClosed):
            async for raw in ws:
                acks.append(json.loads(raw)["ack"])

    sink, heartbeat = RecordingSink(), RecordingHeartbeat()
    async with serve(handle, "127.0.0.1", 0) as listening:
        host, port = next(iter(listening.sockets)).getsockname()[:2]
        session = Session(TicketProtocol(f"ws://{host}:{port}"), sink=sink, cursors=MemoryCursors(),
                          heartbeat=heartbeat, policy=FAST, what="ticket")
        async with running(session):
            await eventually(lambda: acks == ["f1", "f2"], what="both frames acked")
    assert ChannelState.RUNNING in heartbeat.states  # no ready frame was ever sent
    assert sink.invalid_reasons == ["frame f1 has no text"]
    assert [m.text for m in sink.accepted] == ["hi"]


class ClosingProtocol(LoopbackProtocol):
    """A platform that ends sessions with close codes of its own: one for a refused credential, one for a session
    it will not resume."""

    auth_failed_close_codes = MappingProxyType({4004: "copy the token again"})
    identify_again_close_codes = frozenset({4006})


async def test_a_credentials_close_is_auth_failed_and_an_identify_again_close_forgets_the_session(rig: Rig):
    session = Session(ClosingProtocol(rig.server.url), sink=rig.sink, cursors=rig.cursors, heartbeat=rig.heartbeat,
                      policy=FAST, what="loopback")
    task = asyncio.create_task(session.run())
    try:
        await eventually(lambda: ChannelState.RUNNING in rig.heartbeat.states, what="the session to be ready")
        assert rig.server.live is not None
        await rig.server.live.close(4006, "invalid session id")
        await eventually(lambda: len(rig.server.hellos) == 2, what="the second connection")
        assert rig.server.hellos[1]["op"] == "identify"  # not a resume of s-1
        await eventually(lambda: rig.server.closed == 1, what="the first connection to end")
        assert rig.server.live is not None
        await rig.server.live.close(4004, "invalid token")
        with pytest.raises(AuthFailed, match="4004.*copy the token again"):
            await asyncio.wait_for(task, HANG_S)
        assert len(rig.server.hellos) == 2  # no reconnect after the refusal
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, AuthFailed):
            await task
