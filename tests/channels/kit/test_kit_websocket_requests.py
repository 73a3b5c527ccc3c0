"""The kit's websocket session for platforms whose requests share the socket (OneBot): headers, send, answers, 401.

A loopback server checks the handshake's ``Authorization`` header (401 without
it), sends one READY-like frame, and answers every request frame with an
answer frame carrying the request's id.  The session sends through
:meth:`Session.send` and hands answers to ``on_answer``; a refused handshake is
AuthFailed at once, not a retried drop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from channels._kit.websocket import NO_AUTH_CLOSES, NO_CLOSE_CODES, Frame, FrameKind, Resume, Session, Wire
from gateway.core.channel import ChannelState
from gateway.core.errors import AuthFailed, PeerUnavailable
from gateway.core.retry import RetryPolicy
from tests.contract.harness import eventually
from tests.fakes import MemoryCursors, RecordingHeartbeat, RecordingSink

FAST = RetryPolicy(base_delay=0.01, max_delay=0.05, max_attempts=4, jitter=0.0)
BEARER = "Bearer kq7Zr2xWm4"


class Requests:
    greets = False
    heartbeat_interval = 30.0
    opens_ready = False
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
        body = json.loads(wire)
        if body.get("kind") == "connected":
            return Frame(FrameKind.READY)
        return Frame(FrameKind.ANSWER, answer=body)


@contextlib.asynccontextmanager
async def server():
    async def handle(ws: ServerConnection) -> None:
        await ws.send(json.dumps({"kind": "connected"}))
        with contextlib.suppress(ConnectionClosed):
            async for raw in ws:
                await ws.send(json.dumps({"echo": json.loads(raw)["echo"], "ok": True}))

    def check(connection, request):
        return None if request.headers.get("Authorization") == BEARER else connection.respond(401, "no\n")

    async with serve(handle, "127.0.0.1", 0, process_request=check) as listening:
        host, port = next(iter(listening.sockets)).getsockname()[:2]
        yield f"ws://{host}:{port}"


async def test_requests_go_out_on_the_socket_and_their_answers_come_back(tmp_path):
    answers: list[object] = []
    heartbeat = RecordingHeartbeat()
    async with server() as url:
        session = Session(Requests(url), sink=RecordingSink(), cursors=MemoryCursors(), heartbeat=heartbeat,
                          policy=FAST, headers={"Authorization": BEARER}, on_answer=lambda f: answers.append(f.answer))
        with pytest.raises(PeerUnavailable):
            await session.send("{}")  # not connected yet
        task = asyncio.create_task(session.run())
        try:
            await eventually(lambda: ChannelState.RUNNING in heartbeat.states, what="the session running")
            await session.send(json.dumps({"echo": "r1"}))
            await eventually(lambda: answers, what="the answer")
            assert answers == [{"echo": "r1", "ok": True}]
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_handshake_refused_with_401_is_auth_failed_at_once(tmp_path):
    async with server() as url:
        session = Session(Requests(url), sink=RecordingSink(), cursors=MemoryCursors(), heartbeat=RecordingHeartbeat(),
                          policy=FAST, headers={"Authorization": "Bearer wrong9Xq"})
        with pytest.raises(AuthFailed) as refused:
            await asyncio.wait_for(session.run(), 10)
        assert refused.value.code == 401 and "wrong9Xq" not in str(refused.value)
