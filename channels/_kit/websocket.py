"""A websocket session for platforms whose SDK does not own the socket (QQ, OneBot/NapCat, Mochat, DingTalk-style).

These gateways all speak the same dance with different words: connect, say
hello (the server names its heartbeat interval), identify -- or resume a known
session from the last sequence number seen -- then events, each to be
acknowledged, while the client heartbeats and the server answers each beat.
The channel supplies the words as a :class:`WireProtocol` (what identify,
heartbeat and ack frames look like, how to read a frame); :class:`Session`
owns the loop and its guarantees:

- **Ack after durable.** A frame's ack is sent, and its sequence number stored,
  only after ``await sink.accept(...)`` returned.  When ``accept`` fails the
  socket is closed without the ack and the error raised: the supervisor's
  restart resumes from the stored sequence and the platform delivers the frame
  again.
- **Resume.** The session id and the last durable sequence live in the
  account's :class:`~channels.base.CursorStore`, so a reconnect -- or a restart
  of the whole gateway -- resumes where the durable record ends.  A server that
  refuses the resume (``INVALID_SESSION``) gets a fresh identify.
- **Liveness.** Every frame is a sign of life for the supervisor's watchdog;
  an accepted event is an event.  A heartbeat the server does not answer
  before the next one is due means a dead connection that TCP has not noticed
  yet: the session closes it and reconnects.  A platform without client
  heartbeats (``heartbeat`` returns None) is pinged at the websocket level on
  the same schedule; websockets' own keepalive is off, so there is one
  liveness check, not two.
- **Reconnect.** A dropped socket or a server's "reconnect" is tried again in
  place with the kit's one backoff (:mod:`channels._kit.retry`, which is
  :class:`gateway.core.retry.RetryPolicy`'s formula); websockets' own reconnecting
  iterator is not used.  When the waits run out the error goes to the
  supervisor.  A handshake the server refuses with 401 or 403 is a wrong
  credential, not a drop: :class:`~gateway.errors.AuthFailed`, at once; so is a
  socket the server closes with one of the protocol's
  ``auth_failed_close_codes`` (QQ's 4004 "invalid token", 4915 "bot banned"):
  reconnecting would be refused the same way, and the account waits for a human.
  A close code in ``identify_again_close_codes`` (QQ's 4006 "invalid session
  id", 4007 "seq error") forgets the session: the next connection identifies.
- **Requests on the socket.** A platform whose actions travel on the same
  socket (OneBot) sends them with :meth:`Session.send` and gets their answers
  back as ``ANSWER`` frames through ``on_answer``; headers the handshake needs
  (``Authorization``) come from ``headers``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Protocol

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI

from channels._kit.retry import RECONNECT, Retries, Sleep
from gateway.core.channel import ChannelState, CursorStore, Heartbeat
from gateway.core.errors import AuthFailed, InvalidEvent, PeerUnavailable
from gateway.core.messages import InboundMessage
from gateway.core.retry import RetryPolicy

log = logging.getLogger(__name__)

Wire = str | bytes
"""One websocket message, text or binary, as the platform sends it."""

SESSION_KEY = "ws_session"
SEQUENCE_KEY = "ws_sequence"
NO_AUTH_CLOSES: Mapping[int, str] = MappingProxyType({})
"""``auth_failed_close_codes`` of a platform that ends no session over its credentials with a close code."""
NO_CLOSE_CODES: frozenset[int] = frozenset()


class FrameKind(str, Enum):
    HELLO = "hello"
    """The server's greeting, naming the heartbeat interval."""
    READY = "ready"
    """Identify succeeded: a new session, with its id."""
    RESUMED = "resumed"
    """Resume succeeded: the missed events follow."""
    EVENT = "event"
    HEARTBEAT_ACK = "heartbeat_ack"
    HEARTBEAT_REQUEST = "heartbeat_request"
    """The server asks for a heartbeat now."""
    RECONNECT = "reconnect"
    """The server asks the client to reconnect (and resume)."""
    INVALID_SESSION = "invalid_session"
    """The session cannot be resumed; identify afresh."""
    ANSWER = "answer"
    """The answer to a request the client sent on the socket (an OneBot action's echo); goes to ``on_answer``."""
    IGNORED = "ignored"


@dataclass(frozen=True)
class Frame:
    """What one wire message means, read by the channel's protocol."""

    kind: FrameKind
    sequence: int | None = None
    session_id: str | None = None
    heartbeat_interval: float | None = None
    """Seconds, from a HELLO."""
    messages: Sequence[InboundMessage] = ()
    """The decoded messages of an EVENT (empty for events that carry none: a reaction, a presence)."""
    ack: Wire | None = None
    """What to send back once ``messages`` are durable; None where the platform takes no acks."""
    answer: object = None
    """An ANSWER's decoded body, for ``on_answer``."""
    invalid: str | None = None
    """Why an EVENT whose envelope was read could not be decoded: recorded as ``sink.invalid`` and still acked,
    so a platform that redelivers unacked frames does not send the unreadable one forever (DingTalk)."""


@dataclass(frozen=True)
class Resume:
    """A session to resume: its id and the last sequence the gateway made durable."""

    session_id: str
    sequence: int | None


class WireProtocol(Protocol):
    """A platform's words for the session's dance; pure functions of their arguments, no I/O but ``endpoint``."""

    greets: bool
    """Whether the server speaks first (a HELLO with the heartbeat interval) before the client identifies."""
    heartbeat_interval: float
    """Seconds between heartbeats when no HELLO names them."""
    opens_ready: bool
    """Whether the open socket is itself the session (the URL carried a one-time ticket and no READY follows):
    the account is running once connected (DingTalk's stream mode)."""
    auth_failed_close_codes: Mapping[int, str]
    """Close codes by which the server says the credentials or the account itself are refused, each with what the
    teacher should do: :class:`~gateway.errors.AuthFailed`, not a reconnect (:data:`NO_AUTH_CLOSES` for none)."""
    identify_again_close_codes: frozenset[int]
    """Close codes after which the session cannot be resumed: the next connection identifies afresh."""

    async def endpoint(self, resume: Resume | None) -> str:
        """The ``ws(s)://`` URL to connect to (some platforms hand out a new one per session)."""
        ...

    def identify(self, resume: Resume | None) -> Wire | None:
        """The first frame the client sends: identify, or resume ``resume``; None when the URL or headers did it."""
        ...

    def heartbeat(self, sequence: int | None) -> Wire | None:
        """A heartbeat naming the last sequence seen; None where the platform has none (a ping is sent instead)."""
        ...

    def read(self, wire: Wire) -> Frame:
        """What a wire message means; raise :class:`~gateway.errors.InvalidEvent` for one that cannot be read."""
        ...


class FrameSink(Protocol):
    """What of the channel's sink (``gateway.core.channel.InboundSink``) a session uses: it makes a frame's
    messages durable and records a frame it could not read.  A channel that must do more on accept (its own
    catch-up position) hands the session a small object with these two, not a copy of the whole sink."""

    async def accept(self, messages: Sequence[InboundMessage]) -> None: ...

    def invalid(self, reason: str) -> None: ...


class _NotDurable(Exception):
    """``sink.accept`` failed: carried past the connection-error handling, raised as itself to the supervisor."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _Reconnect(Exception):
    """The server asked for a new connection (or refused the resume): connect again at once."""


class Session:
    """One account's websocket session; :meth:`run` until cancelled, as a channel's ``run`` would."""

    def __init__(self, protocol: WireProtocol, *, sink: FrameSink, cursors: CursorStore, heartbeat: Heartbeat,
                 policy: RetryPolicy = RECONNECT, sleep: Sleep = asyncio.sleep, what: str = "websocket",
                 open_timeout: float = 10.0, headers: Mapping[str, str] | None = None,
                 on_answer: Callable[[Frame], None] | None = None) -> None:
        self.protocol, self.sink, self.cursors, self.heartbeat = protocol, sink, cursors, heartbeat
        self.what, self.open_timeout, self.headers, self.on_answer = what, open_timeout, dict(headers or {}), on_answer
        self._socket: ClientConnection | None = None
        self._retries = Retries(heartbeat, policy=policy, sleep=sleep, what=what)
        self._sequence: int | None = None
        self._answered = True

    async def run(self) -> None:
        while True:
            try:
                await self._connect_once()
            except _NotDurable as failed:  # the socket is closed unacked; the restart resumes from the stored sequence
                raise failed.error from None
            except InvalidStatus as refused:
                status = refused.response.status_code
                if status in (401, 403):
                    raise AuthFailed(self.what, "the server refused the handshake: check the access token",
                                     code=status) from None
                await self._retries.pause(PeerUnavailable(self.what, f"the handshake was answered {status}"))
            except _Reconnect as why:
                log.info("%s reconnecting reason=%s", self.what, why)
            except ConnectionClosed as closed:
                await self._closed(closed.rcvd.code if closed.rcvd else None)
                await self._retries.pause(PeerUnavailable(self.what, f"{type(closed).__name__}: {closed}"))
            except (OSError, InvalidHandshake, InvalidURI, TimeoutError) as error:
                await self._retries.pause(PeerUnavailable(self.what, f"{type(error).__name__}: {error}"))
            except PeerUnavailable as error:
                await self._retries.pause(error)

    async def _closed(self, code: int | None) -> None:
        """AuthFailed when the server closed with one of the protocol's credential codes; a session it will not
        resume forgotten."""
        if code is None:
            return
        why = self.protocol.auth_failed_close_codes.get(code)
        if why is not None:
            raise AuthFailed(self.what, f"the server closed the session ({code}): {why}", code=code) from None
        if code in self.protocol.identify_again_close_codes:
            await self._forget()

    async def _forget(self) -> None:
        await self.cursors.put(SESSION_KEY, "")  # identify afresh next time
        await self.cursors.put(SEQUENCE_KEY, "")

    async def _saved(self) -> Resume | None:
        session = await self.cursors.get(SESSION_KEY)
        if not session:
            return None
        sequence = await self.cursors.get(SEQUENCE_KEY)
        return Resume(session, int(sequence) if sequence else None)

    async def _connect_once(self) -> None:
        resume = await self._saved()
        self._sequence = resume.sequence if resume else None
        url = await self.protocol.endpoint(resume)
        async with connect(url, open_timeout=self.open_timeout, ping_interval=None, proxy=None,
                           additional_headers=self.headers or None) as socket:
            self._socket = socket
            interval = self.protocol.heartbeat_interval
            if self.protocol.greets:
                hello = self.protocol.read(await asyncio.wait_for(socket.recv(), self.open_timeout))
                self.heartbeat.beat()
                if hello.kind is not FrameKind.HELLO:
                    raise PeerUnavailable(self.what, f"expected a hello, got {hello.kind.value}")
                interval = hello.heartbeat_interval or interval
            first = self.protocol.identify(resume)
            if first is not None:
                await socket.send(first)
            self._answered = True
            if self.protocol.opens_ready:
                self._retries.succeeded()
                self.heartbeat.set_state(ChannelState.RUNNING)
                log.info("%s connected", self.what)
            pulse = asyncio.create_task(self._pulse(socket, interval), name=f"{self.what}:heartbeat")
            try:
                await self._read(socket, resume)
            except (PeerUnavailable, ConnectionClosed):
                if pulse.done() and not pulse.cancelled() and (silent := pulse.exception()) is not None:
                    raise silent from None  # the heartbeat closed the socket: say that, not "closed"
                raise
            finally:
                self._socket = None
                pulse.cancel()
                with contextlib.suppress(asyncio.CancelledError, PeerUnavailable, ConnectionClosed):
                    await pulse

    async def _read(self, socket: ClientConnection, resume: Resume | None) -> None:
        async for wire in socket:
            self.heartbeat.beat()  # every frame is a sign of life
            try:
                frame = self.protocol.read(wire)
            except InvalidEvent as error:  # recorded and passed over: one unreadable frame must not stop the account
                self.sink.invalid(str(error))
                continue
            if frame.kind is FrameKind.EVENT:
                await self._event(socket, frame)
            elif frame.kind is FrameKind.ANSWER:
                if self.on_answer is not None:
                    self.on_answer(frame)
            elif frame.kind is FrameKind.HEARTBEAT_ACK:
                self._answered = True
            elif frame.kind is FrameKind.HEARTBEAT_REQUEST:
                await self._beat(socket)
            elif frame.kind in (FrameKind.READY, FrameKind.RESUMED):
                if frame.session_id:
                    await self.cursors.put(SESSION_KEY, frame.session_id)
                self._retries.succeeded()
                self.heartbeat.set_state(ChannelState.RUNNING)
                log.info("%s %s session=%s sequence=%s", self.what, frame.kind.value, frame.session_id or
                         (resume.session_id if resume else None), self._sequence)
            elif frame.kind is FrameKind.RECONNECT:
                raise _Reconnect("the server asked for it")
            elif frame.kind is FrameKind.INVALID_SESSION:
                await self._forget()
                raise _Reconnect("the server refused to resume the session")
        # the server closed the socket: ``async for`` ends on a clean close, raise so it counts as a drop
        await self._closed(socket.close_code)
        raise PeerUnavailable(self.what, f"the server closed the connection ({socket.close_code})")

    async def send(self, wire: Wire) -> None:
        """Send a request on the open socket; PeerUnavailable while there is none (between connections)."""
        socket = self._socket
        if socket is None:
            raise PeerUnavailable(self.what, "not connected")
        try:
            await socket.send(wire)
        except ConnectionClosed as error:
            raise PeerUnavailable(self.what, f"the connection closed ({error.rcvd.code if error.rcvd else 'no code'})") from None

    async def _event(self, socket: ClientConnection, frame: Frame) -> None:
        if frame.invalid is not None:
            self.sink.invalid(frame.invalid)
        if frame.messages:
            try:
                await self.sink.accept(frame.messages)
            except Exception as error:  # no ack: the frame comes again after the restart
                raise _NotDurable(error) from error
            self.heartbeat.event()
        if frame.ack is not None:
            await socket.send(frame.ack)
        if frame.sequence is not None:
            self._sequence = frame.sequence
            await self.cursors.put(SEQUENCE_KEY, str(frame.sequence))

    async def _pulse(self, socket: ClientConnection, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            if not self._answered:
                await socket.close(code=4000, reason="heartbeat not answered")
                raise PeerUnavailable(self.what, f"no answer to a heartbeat within {interval:g} s")
            await self._beat(socket)

    async def _beat(self, socket: ClientConnection) -> None:
        wire = self.protocol.heartbeat(self._sequence)
        self._answered = False
        if wire is not None:
            await socket.send(wire)
            return
        pong = asyncio.ensure_future(await socket.ping())  # resolves when the pong arrives
        pong.add_done_callback(self._ponged)

    def _ponged(self, pong: asyncio.Future[float]) -> None:
        if not pong.cancelled() and pong.exception() is None:  # a closed socket fails it: that is no answer
            self._answered = True
            self.heartbeat.beat()  # a quiet platform's only sign of life: without it the watchdog restarts the account
