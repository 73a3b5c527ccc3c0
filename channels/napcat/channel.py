"""NapcatChannel: one personal QQ account, driven through NapCat's OneBot v11 websocket.

**Off unless opted in** (config.py): NapCat is an unofficial client, and
Tencent may ban the QQ account; ``doctor`` warns on every run (probe.py).

Inbound.  Forward mode (the default) runs the kit's websocket
:class:`~channels._kit.websocket.Session` against NapCat's websocket server,
with ``Authorization: Bearer <access_token>``: a refused handshake (401) is
:class:`~gateway.errors.AuthFailed`, which stops the account for a human;
NapCat's ``lifecycle/connect`` meta event is the session's READY; its
``heartbeat`` meta events are signs of life, and the session pings at the
websocket level as well.  Reverse mode (reverse.py) waits for NapCat to
connect to the gateway's HTTP app and reads the same frames.

OneBot acknowledges nothing and delivers nothing again: an event said while no
socket is open is gone (docs/adr/0045-napcat-onebot-channel.md says what
"exactly once" can mean then).  An event is accepted into the inbox before the
next frame is read; one the store cannot take ends the run, so the account
shows the failure.  The inbox dedups by ``self_id:message_id``, so a NapCat
that replays an event after a reconnect is not answered twice.

Outbound, one part is one ``send_private_msg`` / ``send_group_msg`` on the
same socket (transport.py, echo-correlated), the first part as a reply to the
learner's message.  OneBot takes no idempotency key: a send whose answer was
lost may show twice after the outbound path's retry.  Pacing is the outbound
path's, from ``send_rate_chat`` in platforms.toml (a self-throttle: QQ's risk
control watches bursts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import ClassVar

from cachetools import TTLCache
from starlette.routing import BaseRoute
from starlette.websockets import WebSocket

from channels._kit.websocket import NO_AUTH_CLOSES, NO_CLOSE_CODES, Frame, FrameKind, Resume, Session, Wire
from channels.base import Channel, ChannelContext
from channels.napcat.config import NapcatConfig
from channels.napcat.decode import Answer, frame_of, parse
from channels.napcat.encode import segments, target_params
from channels.napcat.probe import check_settings, probe_login
from channels.napcat.transport import PLATFORM, Actions
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import AuthFailed, BadRequest, InvalidEvent, PeerUnavailable
from gateway.core.messages import Address, MessageId, Referrer, RenderedPart, SentMessage
from gateway.core.probes import ProbeResult, Problem
from gateway.redaction import register_secret

log = logging.getLogger(__name__)
BEAT_S = 5.0
SENT_KEPT = 2000
SENT_TTL_S = 7 * 86400.0


class OneBotWire:
    """The kit session's words for OneBot: no identify, no client heartbeat, READY on ``lifecycle/connect``."""

    greets = False
    heartbeat_interval = 30.0
    opens_ready = False  # READY is NapCat's lifecycle/connect event, not the open socket
    auth_failed_close_codes = NO_AUTH_CLOSES  # a wrong token is a refused handshake (401), not a close code
    identify_again_close_codes = NO_CLOSE_CODES

    def __init__(self, channel: NapcatChannel) -> None:
        self.channel = channel

    async def endpoint(self, resume: Resume | None) -> str:
        return self.channel.settings.ws_url

    def identify(self, resume: Resume | None) -> Wire | None:
        return None  # the bearer in the handshake is the whole login

    def heartbeat(self, sequence: int | None) -> Wire | None:
        return None

    def read(self, wire: Wire) -> Frame:
        return self.channel.read(wire)


class NapcatChannel(Channel[NapcatConfig]):
    name: ClassVar[str] = "napcat"
    config_model = NapcatConfig

    def __init__(self, context: ChannelContext[NapcatConfig]) -> None:
        super().__init__(context)
        register_secret(self.settings.access_token, "napcat access token")
        self.actions = Actions(timeout_s=self.settings.action_timeout_s)
        self._sent: TTLCache[str, bool] = TTLCache(SENT_KEPT, ttl=SENT_TTL_S)
        """Ids of the bot's own messages: a reply to one addresses the bot in a group."""
        self._heartbeat: Heartbeat | None = None
        self._reverse: WebSocket | None = None
        self._failed: asyncio.Future[BaseException] | None = None

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: NapcatConfig) -> list[Problem]:
        return check_settings(settings)

    async def probe(self) -> ProbeResult:
        if self.settings.mode == "reverse":
            return ProbeResult(checked=f"reverse websocket: NapCat connects to /channels/napcat/{self.account}/ws")
        return await probe_login(self.settings)

    # ------------------------------------------------------------------ inbound

    def read(self, wire: Wire) -> Frame:
        """One frame, for either mode; a NapCat logged in as another account than ``self_id`` stops the account."""
        body = parse(wire)
        said = body.get("self_id")
        if said is not None and self.settings.self_id and str(said) != self.settings.self_id:
            raise AuthFailed(PLATFORM, f"NapCat is logged in as QQ {said}, not self_id {self.settings.self_id}")
        return frame_of(body, account=self.account, ours=lambda m: m in self._sent)

    def _answered(self, frame: Frame) -> None:
        if isinstance(frame.answer, Answer):
            self.actions.answered(frame.answer)

    async def run(self, heartbeat: Heartbeat) -> None:
        self._heartbeat = heartbeat
        heartbeat.set_state(ChannelState.CONNECTING)
        if self.settings.mode == "reverse":
            await self._wait_for_napcat(heartbeat)
            return
        token = self.settings.access_token.get_secret_value()
        session = Session(OneBotWire(self), sink=self.context.sink, cursors=self.context.cursors, heartbeat=heartbeat,
                          what=PLATFORM, headers={"Authorization": f"Bearer {token}"}, on_answer=self._answered)
        self.actions.attach(session.send)
        log.info("napcat connecting account=%s url=%s", self.account, self.settings.ws_url)
        try:
            await session.run()
        finally:
            self.actions.attach(None)

    async def _wait_for_napcat(self, heartbeat: Heartbeat) -> None:
        self._failed = asyncio.get_running_loop().create_future()
        heartbeat.set_state(ChannelState.CONNECTING, "waiting for NapCat to connect")
        while True:
            heartbeat.beat()  # the wait itself is healthy; NapCat's own frames beat once it is here
            done, _ = await asyncio.wait({self._failed}, timeout=BEAT_S)
            if done:
                raise self._failed.result()

    async def _serve_reverse(self, websocket: WebSocket, self_id: str) -> None:
        heartbeat, failed = self._heartbeat, self._failed
        if heartbeat is None or failed is None or failed.done():
            await websocket.close(code=1013, reason="the account is not running")
            return
        if self._reverse is not None:
            with contextlib.suppress(Exception):
                await self._reverse.close(code=1000, reason="replaced by a new connection")
        self._reverse = websocket
        self.actions.attach(websocket.send_text)
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("napcat reverse websocket connected account=%s qq=%s", self.account, self_id)
        try:
            while True:
                received = await websocket.receive()
                if received["type"] == "websocket.disconnect":
                    return
                wire: Wire = received.get("text") or received.get("bytes") or b""
                heartbeat.beat()
                try:
                    frame = self.read(wire)
                except InvalidEvent as error:
                    self.context.sink.invalid(str(error))
                    continue
                except AuthFailed as error:
                    failed.set_result(error)
                    return
                if frame.kind is FrameKind.ANSWER:
                    self._answered(frame)
                elif frame.kind is FrameKind.EVENT and frame.messages:
                    try:
                        await self.context.sink.accept(frame.messages)
                    except Exception as error:  # not durable: end the run, the account shows why
                        failed.set_result(error)
                        return
                    heartbeat.event()
        finally:
            if self._reverse is websocket:
                self._reverse = None
                self.actions.attach(None)
                heartbeat.set_state(ChannelState.CONNECTING, "NapCat disconnected; waiting for it to connect again")

    def serves_websockets(self) -> bool:
        return self.settings.mode == "reverse"

    def http_routes(self) -> list[BaseRoute]:
        if not self.serves_websockets():
            return []
        from channels.napcat.reverse import reverse_routes  # starlette's websocket side loads only when served

        return reverse_routes(self.settings.access_token.get_secret_value, self.settings.self_id,
                              self._serve_reverse, self.account)

    # ------------------------------------------------------------------ outbound

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        action, params = target_params(target)
        message = segments(part, referrer if part.index == 0 else Referrer())
        if not message:
            raise BadRequest(PLATFORM, "nothing to send: no text, no file with a URL")
        data = await self.actions.call(action, {**params, "message": message})
        sent = data.get("message_id") if isinstance(data, dict) else None
        if sent is None:
            raise PeerUnavailable(PLATFORM, f"{action}: the answer named no message_id")
        self._sent[str(sent)] = True
        log.info("napcat message out account=%s chat=%s message=%s", self.account, target.conversation.chat, sent)
        return SentMessage(message=MessageId(str(sent)))
