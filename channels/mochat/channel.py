"""MochatChannel: one claw agent, pushed to by Socket.IO and polled over REST while the socket is down.

**Inbound, two roads to one inbox.**  The socket is the main road: connect with
the claw token in ``auth`` (msgpack frames), subscribe the configured sessions
with their stored cursors (``com.claw.im.subscribeSessions``; the ack carries what
the agent missed) and the panels (``com.claw.im.subscribePanels``), then take
``claw.session.events`` and ``notify:chat.message.add`` as they come.  When the
socket cannot connect or drops, the channel does not wait idle: it long-polls
each session (``sessions/watch``, ``watch_timeout_s``) and reads each panel's
latest messages, and between such spells tries the socket again after the kit's
backoff (``RetryPolicy`` full jitter, capped at ``socket_retry_max_s``).  That is
the one reconnect layer: python-socketio's own reconnection is off (transport.py).

**Nothing twice across the switch.**  Both roads read and write the same cursor
per session (``session:<id>``, the last durable ``seq``) and per panel
(``panel:<id>``, the last durable message id) in the account's CursorStore, both
take batches under one lock, and the inbox's dedup key is Mochat's message id.
A cursor moves only after ``sink.accept`` returned, so a crash or a switch
repeats at most a batch, which the inbox then drops as seen.

**Outbound**: ``sessions/send`` for a session, ``groups/panels/send`` for a panel,
markdown text, a reply naming the learner's message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, ClassVar

from channels._kit.ack import AckClock
from channels._kit.retry import Retries, wait_alive
from channels.base import Channel, ChannelContext
from channels.mochat.config import MochatConfig
from channels.mochat.decode import Batch, panel_message, session_batch
from channels.mochat.transport import PLATFORM, MochatApi, new_socket
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import AuthFailed, InvalidEvent, PeerUnavailable, PlatformError, TransientError
from gateway.core.messages import Address, ConversationKind, InboundMessage, MessageId, Referrer, RenderedPart, SentMessage
from gateway.core.probes import ProbeResult, Problem
from gateway.core.retry import RetryPolicy

log = logging.getLogger(__name__)
ALIVE_CHECK_S = 1.0
SUBSCRIBE_SESSIONS = "com.claw.im.subscribeSessions"
SUBSCRIBE_PANELS = "com.claw.im.subscribePanels"
SESSION_EVENTS = "claw.session.events"
PANEL_MESSAGE = "notify:chat.message.add"


def _refused(data: Any) -> bool:
    """Whether a socket's connect error says the token was refused (the emulator's and Mochat's 401)."""
    said = str(data).lower()
    return "401" in said or "token" in said or "unauthori" in said


class MochatChannel(Channel[MochatConfig]):
    name: ClassVar[str] = "mochat"
    config_model = MochatConfig

    def __init__(self, context: ChannelContext[MochatConfig]) -> None:
        super().__init__(context)
        self._api: MochatApi | None = None
        self._lock = asyncio.Lock()
        self._heartbeat: Heartbeat | None = None
        self._ended: asyncio.Future[Exception] | None = None
        self._subscribed = False
        self.acks = AckClock.of(PLATFORM, self.account)
        self.socket_policy = RetryPolicy(base_delay=1.0, max_delay=self.settings.socket_retry_max_s, max_attempts=1 << 30)

    @property
    def api(self) -> MochatApi:
        if self._api is None:
            self._api = MochatApi(self.settings.base_url, self.settings.claw_token.get_secret_value())
        return self._api

    # ------------------------------------------------------------------ the run: socket, else polling

    async def run(self, heartbeat: Heartbeat) -> None:
        """The socket while it holds; while it cannot, a spell of polling, then the socket again.

        A refused token (``AuthFailed``) or a store that cannot take a batch ends the run for the
        supervisor; a socket that is merely down never does, since the polling keeps the agent answering."""
        self._heartbeat, failures = heartbeat, 0
        while True:
            self._subscribed = False
            try:
                await self._on_socket(heartbeat)
                continue  # pragma: no cover - _on_socket always raises
            except TransientError as error:
                down = error
            failures = 1 if self._subscribed else failures + 1
            delay = self.socket_policy.delay_for(failures, down) or self.settings.socket_retry_max_s
            log.info("mochat socket down, polling account=%s failures=%d for=%.1fs reason=%s",
                     self.account, failures, delay, down)
            heartbeat.set_state(ChannelState.RUNNING, f"polling: the socket is down ({str(down)[:80]})")
            await self._poll_for(max(delay, 1.0), heartbeat)

    async def _on_socket(self, heartbeat: Heartbeat) -> None:
        """Connect, subscribe, take pushes until the socket ends; always raises (the drop, or the refusal)."""
        import socketio

        loop = asyncio.get_running_loop()
        self._ended = ended = loop.create_future()
        refusal: list[Any] = []
        sio = new_socket()
        sio.on("connect_error", lambda data: refusal.append(data))
        sio.on("disconnect", lambda *_: self._end(PeerUnavailable(PLATFORM, "the socket closed")))
        sio.on(SESSION_EVENTS, self._pushed_session)
        sio.on(PANEL_MESSAGE, self._pushed_panel)
        try:
            try:
                await asyncio.wait_for(sio.connect(
                    self.settings.socket_base, socketio_path=self.settings.socket_path, transports=["websocket"],
                    auth={"token": self.settings.claw_token.get_secret_value()},
                    wait_timeout=self.settings.connect_timeout_s), self.settings.connect_timeout_s + 1)
            except (socketio.exceptions.ConnectionError, TimeoutError, OSError) as error:
                if refusal and _refused(refusal[-1]):
                    raise AuthFailed(PLATFORM, "the socket refused the claw token: copy the agent's token again") from None
                raise PeerUnavailable(PLATFORM, f"the socket cannot connect ({type(error).__name__})") from None
            await self._subscribe(sio)
            self._subscribed = True
            heartbeat.set_state(ChannelState.RUNNING)
            log.info("mochat socket subscribed account=%s sessions=%d panels=%d", self.account,
                     len(self.settings.sessions), len(self.settings.panels))
            while True:
                try:
                    failure = await asyncio.wait_for(asyncio.shield(ended), ALIVE_CHECK_S)
                except TimeoutError:
                    if not sio.connected:
                        raise PeerUnavailable(PLATFORM, "the socket closed") from None
                    heartbeat.beat()
                    continue
                raise failure
        finally:
            self._ended = None
            await sio.disconnect()

    async def _subscribe(self, sio: Any) -> None:
        """Subscribe with the durable cursors; take what the ack hands back (what the agent missed), then
        read each panel once, for what was said between the last poll and the socket."""
        timeout = self.settings.connect_timeout_s
        if self.settings.sessions:
            cursors = {s: int(await self.context.cursors.get(f"session:{s}") or 0) for s in self.settings.sessions}
            ack = await sio.call(SUBSCRIBE_SESSIONS, {"sessionIds": list(self.settings.sessions), "cursors": cursors,
                                                      "limit": self.settings.watch_limit}, timeout=timeout)
            for batch in self._acked(ack, "sessions"):
                await self._take_session(batch)
        if self.settings.panels:
            self._acked(await sio.call(SUBSCRIBE_PANELS, {"panelIds": list(self.settings.panels)}, timeout=timeout),
                        "panels")
            for panel in self.settings.panels:
                await self._poll_panel(panel)

    @staticmethod
    def _acked(ack: Any, what: str) -> list[Any]:
        if not isinstance(ack, dict) or ack.get("result") is not True:
            said = str(ack.get("message") if isinstance(ack, dict) else ack)[:120]
            if _refused(said):
                raise AuthFailed(PLATFORM, f"subscribing {what} was refused: {said}")
            raise PeerUnavailable(PLATFORM, f"subscribing {what} failed: {said}")
        data = ack.get("data")
        sessions = data.get("sessions") if isinstance(data, dict) else data
        return sessions if isinstance(sessions, list) else []

    def _end(self, error: Exception) -> None:
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(error)

    async def _pushed_session(self, payload: Any) -> None:
        await self._pushed(self._take_session(payload))

    async def _pushed_panel(self, payload: Any) -> None:
        await self._pushed(self._take_panel(payload))

    async def _pushed(self, taking: Any) -> None:
        """A push handler never raises into python-socketio: a store that cannot take it ends the socket."""
        try:
            await taking
        except Exception as error:
            log.warning("mochat push not stored account=%s error=%s", self.account, error)
            self._end(error)

    # ------------------------------------------------------------------ taking batches (both roads)

    async def _accept(self, messages: list[InboundMessage]) -> None:
        if not messages:
            return
        await self.acks.accept(self.context.sink, messages)
        for message in messages:
            log.info("mochat message in account=%s chat=%s message=%s", self.account,
                     message.address.conversation.chat, message.event_id)
        if self._heartbeat is not None:
            self._heartbeat.event()

    async def _take_session(self, raw: Any) -> None:
        session = raw.get("sessionId") if isinstance(raw, dict) else None
        if not isinstance(session, str) or session not in self.settings.sessions:
            self.context.sink.invalid(f"mochat session batch for a session not heard: {str(session)[:40]}")
            return
        async with self._lock:
            name = f"session:{session}"
            after = int(await self.context.cursors.get(name) or 0)
            try:
                batch: Batch = session_batch(raw, account=self.account, agent=self.settings.agent_user_id, after=after)
            except InvalidEvent as error:
                self.context.sink.invalid(str(error))
                return
            for reason in batch.invalid:
                self.context.sink.invalid(reason)
            await self._accept(batch.messages)
            if batch.cursor is not None:
                await self.context.cursors.put(name, batch.cursor)

    async def _take_panel(self, raw: Any, *, cursor: bool = True) -> None:
        async with self._lock:
            try:
                message = panel_message(raw, account=self.account, agent=self.settings.agent_user_id)
            except InvalidEvent as error:
                self.context.sink.invalid(str(error))
                return
            if message is None:
                return
            panel = str(message.address.conversation.chat)
            if panel not in self.settings.panels:
                return
            await self._accept([message])
            if cursor:
                await self.context.cursors.put(f"panel:{panel}", str(message.event_id))

    # ------------------------------------------------------------------ the polling fallback

    async def _poll_for(self, seconds: float, heartbeat: Heartbeat) -> None:
        """Poll every session and panel for ``seconds`` (a long poll in flight is let finish)."""
        deadline = time.monotonic() + seconds
        try:
            async with asyncio.TaskGroup() as group:
                for session in self.settings.sessions:
                    group.create_task(self._watch_until(session, deadline, heartbeat))
                for panel in self.settings.panels:
                    group.create_task(self._panels_until(panel, deadline, heartbeat))
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from None

    async def _watch_until(self, session: str, deadline: float, heartbeat: Heartbeat) -> None:
        retries = Retries(heartbeat, what=f"mochat watch {session}")
        while time.monotonic() < deadline:
            try:
                cursor = int(await self.context.cursors.get(f"session:{session}") or 0)
                batch = await self.api.watch(session, cursor, timeout_s=self.settings.watch_timeout_s,
                                             limit=self.settings.watch_limit)
                retries.succeeded()
            except PlatformError as error:
                await retries.pause(error)
                continue
            heartbeat.beat()
            await self._take_session(batch)

    async def _panels_until(self, panel: str, deadline: float, heartbeat: Heartbeat) -> None:
        retries = Retries(heartbeat, what=f"mochat panel {panel}")
        while time.monotonic() < deadline:
            try:
                await self._poll_panel(panel)
                retries.succeeded()
            except PlatformError as error:
                await retries.pause(error)
                continue
            heartbeat.beat()
            await wait_alive(heartbeat, min(self.settings.panel_poll_s, max(deadline - time.monotonic(), 0.0)))

    async def _poll_panel(self, panel: str) -> None:
        """The panel's latest messages after the durable one, in order."""
        messages = await self.api.panel_messages(panel, limit=self.settings.watch_limit)
        last = await self.context.cursors.get(f"panel:{panel}")
        ids = [m.get("_id") if isinstance(m, dict) else None for m in messages]
        start = ids.index(last) + 1 if last is not None and last in ids else 0
        for raw in messages[start:]:
            await self._take_panel(raw)

    # ------------------------------------------------------------------ outbound

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        chat = str(target.conversation.chat)
        panel = target.conversation.kind == ConversationKind.GROUP
        reply_to = str(referrer.message) if referrer.message and part.index == 0 else None
        data = await self.api.send(session=None if panel else chat, panel=chat if panel else None, content=part.text,
                                   reply_to=reply_to, group=referrer.token if panel else None)
        sent = data.get("messageId") or data.get("_id") or idempotency_key
        log.info("mochat sent account=%s chat=%s part=%d", self.account, chat, part.index)
        return SentMessage(message=MessageId(str(sent)))

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: MochatConfig) -> list[Problem]:
        problems = []
        if not settings.claw_token.get_secret_value().strip():
            problems.append(Problem(message="the claw token is empty",
                                    fix="put the agent's claw token (claw_...) into the environment variable named"))
        if not settings.base_url.startswith(("http://", "https://")):
            problems.append(Problem(message=f"base_url {settings.base_url!r} is not an http(s) address",
                                    fix="remove base_url to use https://mochat.io"))
        return problems

    async def probe(self) -> ProbeResult:
        """``sessions/list`` with the token: reads nothing the agent would answer."""
        problems = list(self.check(self.settings))
        if not problems:
            try:
                await self.api.call("sessions/list", {"limit": 1})
            except AuthFailed:
                problems.append(Problem(message="Mochat refused the claw token",
                                        fix="copy the agent's claw token again (it changes when the agent is re-registered)"))
            except PlatformError as error:
                problems.append(Problem(message=f"Mochat did not answer: {error}", fix="check base_url and the network"))
        return ProbeResult(checked="the claw token against sessions/list", problems=tuple(problems))

    async def close(self) -> None:
        api, self._api = self._api, None
        if api is not None:
            await api.close()
