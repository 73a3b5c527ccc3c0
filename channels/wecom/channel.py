"""WecomChannel: one WeCom AI bot (智能机器人) on its long connection.

A self-built app (``kind: app``) is another class, :class:`~channels.wecom.app.WecomAppChannel`, which
``WecomChannel(context)`` returns for it; what follows is the AI bot.

Inbound, the SDK dials ``ws_url``, subscribes with the bot id and secret
(``aibot_subscribe``) and pings; WeCom pushes each message said to the bot
(a direct chat, or an @-mention in a group) as ``aibot_msg_callback``.  The
long connection has no per-callback ack: the answer *is* the reply under the
callback's ``req_id``.  So the rule "ack after durable" reads here as "nothing
goes back before the message is durable": each callback is decoded and awaited
into the inbox (timed by the kit's ack clock against the 5 s in
platforms.toml), and the reply comes out of the outbox.  A callback WeCom sends
again lands on the same ``msgid`` and is answered once.  A callback the store
cannot take ends the run, so the account shows the failure and the restart
reconnects.

The SDK (the ``wecom`` extra) is imported only here, on the AI bot's path, and only once an AI-bot
account runs: a self-built app needs none of it.  An AI-bot account on a machine without it is refused
with the command that installs the extra (``check`` and ``run``), never with an ``ImportError``.

Reconnect is the supervisor's alone: the SDK dials once (transport.py), and a
drop, a refused subscribe or WeCom's ``disconnected_event`` ends ``run``.  The
socket's state is also checked every second: the SDK 1.0.8 reads frames with
``async for`` over the connection, which ends quietly on a clean close (code
1000) -- no ``disconnected`` event, no reconnect -- so a server closing politely
would otherwise leave the account deaf while it looked alive.

Outbound, every answer is a ``stream`` reply (encode.py): ``start`` only makes
the handle (the stream shows on WeCom with its first update), ``append`` sends
the text so far, ``finish`` sends it with ``finish: true``.  A stream WeCom no
longer takes (errcode 846608) is finished as a markdown message to the chat.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar
from urllib.parse import urlsplit

from channels._kit.ack import AckClock
from channels.base import Channel, ChannelContext
from channels.registry import kind_unavailable
from channels.wecom.config import CLOUD_WS, WecomConfig
from channels.wecom.decode import Skipped, decode
from channels.wecom.encode import Stream, frame_of, markdown_body, stream_id
from channels.wecom.transport import PLATFORM, call, new_client
from gateway.core.capabilities import ChannelCapabilities, capabilities_of
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import AuthFailed, ChannelUnavailable, InvalidEvent, PeerUnavailable, ReplyWindowClosed
from gateway.core.messages import (
    Address,
    MessageId,
    Referrer,
    RenderedPart,
    SentMessage,
    StreamChunk,
    StreamHandle,
)
from gateway.core.probes import ProbeResult, Problem
from gateway.extras import install_command

log = logging.getLogger(__name__)
ALIVE_CHECK_S = 1.0


class WecomChannel(Channel[WecomConfig]):
    """The AI bot; ``WecomChannel(context)`` for a self-built app (``kind: app``) gives its own class (app.py)."""

    name: ClassVar[str] = "wecom"
    config_model = WecomConfig

    def __new__(cls, context: ChannelContext[WecomConfig]) -> WecomChannel:
        if cls is WecomChannel and context.config.kind == "app":
            from channels.wecom.app import WecomAppChannel

            return super().__new__(WecomAppChannel)
        return super().__new__(cls)

    @classmethod
    def capabilities_for(cls, settings: WecomConfig) -> ChannelCapabilities:
        return capabilities_of(cls.name, settings.kind)

    def __init__(self, context: ChannelContext[WecomConfig]) -> None:
        super().__init__(context)
        self._client: Any = None
        self._heartbeat: Heartbeat | None = None
        self._ended: asyncio.Future[Exception] | None = None
        self.acks = AckClock.of(PLATFORM, self.account)

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        mode = self.settings.ai_bot
        missing = kind_unavailable(PLATFORM, "ai_bot")
        if missing is not None:
            raise ChannelUnavailable(f"wecom/{self.account}: {missing}")
        loop = asyncio.get_running_loop()
        self._heartbeat, self._ended = heartbeat, loop.create_future()
        subscribed: asyncio.Future[None] = loop.create_future()
        self._client = client = new_client(mode, heartbeat_s=self.settings.heartbeat_s)
        client.on("message", self._on_frame)
        client.on("authenticated", lambda: None if subscribed.done() else subscribed.set_result(None))
        client.on("disconnected", lambda reason: self._end(PeerUnavailable(PLATFORM, f"the long connection closed ({str(reason)[:80]})")))
        client.on("error", self._on_error)
        try:
            await client.connect()
            waits: set[asyncio.Future[Any]] = {subscribed, self._ended}
            await asyncio.wait(waits, timeout=self.settings.connect_timeout_s, return_when=asyncio.FIRST_COMPLETED)
            if self._ended.done():
                raise self._ended.result()
            if not subscribed.done():
                raise PeerUnavailable(PLATFORM, f"no answer to the subscribe within {self.settings.connect_timeout_s:g} s")
            heartbeat.set_state(ChannelState.RUNNING)
            log.info("wecom ai bot subscribed account=%s bot=%s", self.account, mode.bot_id)
            while True:
                try:
                    failure = await asyncio.wait_for(asyncio.shield(self._ended), ALIVE_CHECK_S)
                except TimeoutError:
                    if not client.is_connected:  # a clean close (1000) ends the SDK's reading without a word
                        raise PeerUnavailable(PLATFORM, "the long connection closed") from None
                    heartbeat.beat()
                    continue
                raise failure
        finally:
            self._client = None
            await client.disconnect()

    def _end(self, error: Exception) -> None:
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(error)

    def _on_error(self, error: Exception) -> None:
        """The SDK's ``error`` event: a refused subscribe (its text, then ``WSAuthFailureError``) ends the run
        for a human; a given-up reconnect ends it for the supervisor; anything else is only logged."""
        from wecom_aibot_sdk import WSAuthFailureError, WSReconnectExhaustedError  # loaded: the SDK reports this

        if isinstance(error, WSAuthFailureError) or str(error).startswith("Authentication failed"):
            self._end(AuthFailed(PLATFORM, "the subscribe was refused: check bot_id and secret on the bot's page"))
        elif isinstance(error, WSReconnectExhaustedError):
            self._end(PeerUnavailable(PLATFORM, "the long connection is down"))
        else:
            log.info("wecom sdk error account=%s error=%s", self.account, type(error).__name__)

    async def _on_frame(self, frame: dict[str, Any]) -> None:
        """Every message callback: decode, make durable; only then may anything answer it."""
        try:
            message = decode(frame, account=self.account)
        except Skipped as skipped:
            body = frame.get("body") or {}
            self.context.sink.refused("wecom-msgtype", f"{str(body.get('msgid'))[:64]}: {skipped}")
            return
        except InvalidEvent as error:
            self.context.sink.invalid(str(error))
            return
        try:
            await self.acks.accept(self.context.sink, [message])
        except Exception as error:
            log.warning("wecom callback not stored account=%s message=%s error=%s", self.account, message.event_id, error)
            self._end(error)
            return
        log.info("wecom message in account=%s chat=%s message=%s", self.account,
                 message.address.conversation.chat, message.event_id)
        if self._heartbeat is not None:
            self._heartbeat.event()

    # ------------------------------------------------------------------ outbound

    def _live(self) -> Any:
        if self._client is None:
            raise PeerUnavailable(PLATFORM, "the long connection is not open")
        return self._client

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        """One part: a finished stream answering the learner's message, or markdown to the chat when
        there is no message to answer or WeCom no longer takes an answer to it."""
        chat = str(target.conversation.chat)
        if referrer.token:
            stream = Stream(referrer.token, stream_id(idempotency_key), chat)
            try:
                await self._reply(stream, part.text, finish=True)
                log.info("wecom sent account=%s chat=%s stream=%s part=%d", self.account, chat, stream.id, part.index)
                return SentMessage(message=MessageId(stream.id), handle=stream.dump())
            except ReplyWindowClosed as closed:
                log.info("wecom reply window closed, sending to the chat account=%s chat=%s reason=%s",
                         self.account, chat, closed)
        await call("aibot_send_msg", self._live().send_message(chat, markdown_body(part.text)))
        log.info("wecom sent account=%s chat=%s part=%d markdown", self.account, chat, part.index)
        return SentMessage(message=MessageId(stream_id(idempotency_key)))

    async def start(self, target: Address, referrer: Referrer, key: str) -> StreamHandle:
        """The handle only: WeCom shows a stream with its first update, so nothing is sent yet."""
        if not referrer.token:
            raise ReplyWindowClosed(PLATFORM, "a stream answers a message, and this reply has none")
        stream = Stream(referrer.token, stream_id(key), str(target.conversation.chat))
        return StreamHandle(target=target, referrer=referrer, handle=stream.dump())

    async def append(self, stream: StreamHandle, chunk: StreamChunk) -> None:
        await self._reply(Stream.load(stream.handle), chunk.so_far.text, finish=False)

    async def finish(self, stream: StreamHandle, final: RenderedPart) -> SentMessage:
        opened = Stream.load(stream.handle)
        try:
            await self._reply(opened, final.text, finish=True)
        except ReplyWindowClosed as closed:
            log.info("wecom stream expired, final text to the chat account=%s chat=%s reason=%s",
                     self.account, opened.chat, closed)
            await call("aibot_send_msg", self._live().send_message(opened.chat, markdown_body(final.text)))
        log.info("wecom stream finished account=%s chat=%s stream=%s", self.account, opened.chat, opened.id)
        return SentMessage(message=MessageId(opened.id), handle=stream.handle)

    async def _reply(self, stream: Stream, text: str, *, finish: bool) -> None:
        await call("aibot_respond_msg", self._live().reply_stream(frame_of(stream.req_id), stream.id, text, finish=finish))

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: WecomConfig) -> list[Problem]:
        if settings.kind == "app":
            from channels.wecom.app import WecomAppChannel

            return WecomAppChannel.check_app(settings)
        mode, problems = settings.ai_bot, []
        missing = kind_unavailable(PLATFORM, "ai_bot")
        if missing is not None:
            problems.append(Problem(message=missing, fix=f"install the extra ({install_command('wecom')}), "
                                                         "or use kind: app, which needs no SDK"))
        if urlsplit(mode.ws_url).scheme not in ("ws", "wss"):
            problems.append(Problem(message=f"ws_url {mode.ws_url!r} is not a websocket address (wss://...)",
                                    fix=f"remove ws_url to use WeCom's own ({CLOUD_WS})"))
        if not mode.secret.get_secret_value().strip():
            problems.append(Problem(message="the AI bot's secret is empty",
                                    fix="copy the Secret from the bot's page (API mode, long connection) into the environment"))
        return problems

    async def probe(self) -> ProbeResult:
        """Settings only: subscribing would take the running account's one long connection (WeCom keeps
        one per bot and closes the older), so a wrong secret shows when the account starts."""
        return ProbeResult(checked="the long connection is checked when the account starts (subscribe)",
                           problems=tuple(self.check(self.settings)))

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.disconnect()
