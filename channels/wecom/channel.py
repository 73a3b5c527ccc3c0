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

**The stream's time limit.**  WeCom takes a stream's updates for six minutes from
the learner's message (``reply_token_lifetime_s`` in platforms.toml), and an
answer still being written then would be cut off by 846608 with the learner
looking at a stream that never finished.  So the channel finishes the stream
itself ``stream_margin_s`` (30 s) before the limit: with what it shows so far, cut
back to a whole line or word, plus a short phrase from the catalogue saying the
rest follows (in the answer's language).  A timer does it when no update comes
in time (a model thinking for minutes); an update that finds the time up does it
too.  When the answer ends, what the stream did not show goes to the chat as one
markdown message -- the way an expired stream's answer goes -- so nothing is lost,
and nothing is sent twice.  A process restarted after that time, which cannot
know what the stream showed, sends the whole answer to the chat: repeated, never
lost, and never an update after WeCom stopped taking them.

Inbound images and files are fetched after the ack by the pipeline
(:meth:`WecomChannel.fetch_media`): downloaded through the kit within the
fetch limit, then decrypted with the message's own key (the kit's
:func:`~channels._kit.msgcrypt.decrypt_file`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx

from channels._kit.ack import AckClock
from channels._kit.media import download, sniffed_type
from channels._kit.msgcrypt import decrypt_file
from channels.base import Channel, ChannelContext
from channels.registry import kind_unavailable
from channels.wecom.config import CLOUD_WS, WecomConfig
from channels.wecom.decode import Download, Skipped, decode
from channels.wecom.encode import ReplyTo, Stream, cut_point, frame_of, markdown_body, rest_after, stream_id
from channels.wecom.transport import PLATFORM, call, new_client
from gateway.core.capabilities import ChannelCapabilities, capabilities_of
from gateway.core.channel import ChannelState, Heartbeat, MediaStream
from gateway.core.errors import (
    AuthFailed,
    BadRequest,
    ChannelUnavailable,
    ForgedRequest,
    InvalidEvent,
    PeerUnavailable,
    PlatformError,
    ReplyWindowClosed,
    TooLarge,
)
from gateway.core.messages import (
    Address,
    MediaRef,
    MessageId,
    Referrer,
    RenderedPart,
    SentMessage,
    StreamChunk,
    StreamHandle,
)
from gateway.core.phrases import CHINESE, ENGLISH, Phrase, say
from gateway.core.probes import ProbeResult, Problem
from gateway.extras import install_command

log = logging.getLogger(__name__)
ALIVE_CHECK_S = 1.0
DOWNLOAD_TIMEOUT = httpx.Timeout(30.0, connect=5.0)


def language_of(text: str) -> str:
    """The catalogue language of an answer, for the phrase that continues it: Chinese when it has a CJK
    ideograph, else English (WeCom says nothing of the learner's language)."""
    return CHINESE if any("\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf" for ch in text) else ENGLISH


@dataclass
class _Open:
    """A stream this process is writing: what it has shown, whether it was finished early, its timer."""

    stream: Stream
    restored: bool
    """Met first after a restart (no ``start`` here): what an earlier process showed is not known."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    text: str = ""
    shown: str | None = None
    """Set once the stream was finished early: the text it kept (the rest goes to the chat)."""
    timer: asyncio.Task[None] | None = None


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
        self._open: dict[str, _Open] = {}
        self._downloads: httpx.AsyncClient | None = None

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

    @property
    def stream_limit_s(self) -> float | None:
        """How long after the learner's message WeCom takes the answer's stream (platforms.toml, or the account's)."""
        return self.settings.stream_limit_s or self.declared.reply_token_lifetime_s

    def _left_s(self, stream: Stream) -> float | None:
        """Seconds until the channel must have finished ``stream`` itself; None when its message's time is not known."""
        limit = self.stream_limit_s
        if stream.at is None or limit is None:
            return None
        return stream.at + limit - self.settings.stream_margin_s - time.time()

    def _due(self, stream: Stream) -> bool:
        left = self._left_s(stream)
        return left is not None and left <= 0

    async def _to_chat(self, chat: str, text: str) -> None:
        await call("aibot_send_msg", self._live().send_message(chat, markdown_body(text)))

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        """One part: a finished stream answering the learner's message, or markdown to the chat when
        there is no message to answer, its time is up, or WeCom no longer takes an answer to it."""
        chat = str(target.conversation.chat)
        if referrer.token:
            reply_to = ReplyTo.load(referrer.token)
            stream = Stream(reply_to.req_id, stream_id(idempotency_key), chat, reply_to.at)
            if not self._due(stream):
                try:
                    await self._reply(stream, part.text, finish=True)
                    log.info("wecom sent account=%s chat=%s stream=%s part=%d", self.account, chat, stream.id, part.index)
                    return SentMessage(message=MessageId(stream.id), handle=stream.dump())
                except ReplyWindowClosed as closed:
                    log.info("wecom reply window closed, sending to the chat account=%s chat=%s reason=%s",
                             self.account, chat, closed)
        await self._to_chat(chat, part.text)
        log.info("wecom sent account=%s chat=%s part=%d markdown", self.account, chat, part.index)
        return SentMessage(message=MessageId(stream_id(idempotency_key)))

    async def start(self, target: Address, referrer: Referrer, key: str) -> StreamHandle:
        """The handle only: WeCom shows a stream with its first update, so nothing is sent yet.  The stream's
        timer starts here: it finishes the stream early if the answer is not done in WeCom's time."""
        if not referrer.token:
            raise ReplyWindowClosed(PLATFORM, "a stream answers a message, and this reply has none")
        reply_to = ReplyTo.load(referrer.token)
        stream = Stream(reply_to.req_id, stream_id(key), str(target.conversation.chat), reply_to.at)
        self._opened(stream, restored=False)
        return StreamHandle(target=target, referrer=referrer, handle=stream.dump())

    def _opened(self, stream: Stream, *, restored: bool) -> _Open:
        live = self._open.get(stream.id)
        if live is None:
            live = self._open[stream.id] = _Open(stream, restored)
            left = self._left_s(stream)
            if left is not None and left > 0:
                live.timer = asyncio.get_running_loop().create_task(self._finish_early_in(live, left))
        return live

    async def _finish_early_in(self, live: _Open, delay: float) -> None:
        """The timer: no update came before the time was up, so the stream is finished with what it shows."""
        await asyncio.sleep(delay)
        async with live.lock:
            if live.shown is None and live.stream.id in self._open:
                try:
                    await self._finish_early(live)
                except PlatformError as error:  # the answer's finish tries again, and falls back to the chat
                    log.info("wecom stream not finished early account=%s stream=%s error=%s",
                             self.account, live.stream.id, error)

    async def _finish_early(self, live: _Open) -> None:
        """Finish the stream now with its text so far (cut at a whole line or word) and the phrase that says
        the rest follows; :meth:`finish` sends the rest.  A stream WeCom no longer takes kept nothing."""
        phrase = say(Phrase.STREAM_CONTINUES, language_of(live.text))
        room = self.declared.text_limit - len(phrase.encode()) - 2
        text = live.text.encode()[:max(room, 0)].decode("utf-8", "ignore")  # within the limit with the phrase
        shown = cut_point(text) if text else ""
        body = f"{shown.rstrip()}\n\n{phrase}" if shown.strip() else phrase
        try:
            await self._reply(live.stream, body, finish=True)
        except ReplyWindowClosed as closed:
            log.info("wecom stream already closed when finishing early account=%s stream=%s reason=%s",
                     self.account, live.stream.id, closed)
            shown = ""
        live.shown = shown
        log.info("wecom stream finished early, the rest follows as a message account=%s chat=%s stream=%s",
                 self.account, live.stream.chat, live.stream.id)

    async def append(self, stream: StreamHandle, chunk: StreamChunk) -> None:
        live = self._opened(Stream.load(stream.handle), restored=True)
        async with live.lock:
            live.text = chunk.so_far.text
            if live.shown is not None:
                return  # finished early: the rest goes to the chat when the answer ends
            if self._due(live.stream):
                self._stop_timer(live)
                await self._finish_early(live)
                return
            await self._reply(live.stream, live.text, finish=False)

    async def finish(self, stream: StreamHandle, final: RenderedPart) -> SentMessage:
        opened = Stream.load(stream.handle)
        live = self._opened(opened, restored=True)
        async with live.lock:
            self._stop_timer(live)
            if live.shown is not None:
                rest = rest_after(live.shown, final.text)
                if rest.strip():
                    await self._to_chat(opened.chat, rest)
                log.info("wecom rest of an early-finished stream sent account=%s chat=%s stream=%s",
                         self.account, opened.chat, opened.id)
            elif live.restored and self._due(opened):
                log.info("wecom stream's time is up after a restart, the answer goes to the chat account=%s chat=%s",
                         self.account, opened.chat)
                await self._to_chat(opened.chat, final.text)
            else:
                try:
                    await self._reply(opened, final.text, finish=True)
                except ReplyWindowClosed as closed:
                    log.info("wecom stream expired, final text to the chat account=%s chat=%s reason=%s",
                             self.account, opened.chat, closed)
                    await self._to_chat(opened.chat, final.text)
            self._open.pop(opened.id, None)
        log.info("wecom stream finished account=%s chat=%s stream=%s", self.account, opened.chat, opened.id)
        return SentMessage(message=MessageId(opened.id), handle=stream.handle)

    @staticmethod
    def _stop_timer(live: _Open) -> None:
        if live.timer is not None and live.timer is not asyncio.current_task():
            live.timer.cancel()
        live.timer = None

    async def _reply(self, stream: Stream, text: str, *, finish: bool) -> None:
        await call("aibot_respond_msg", self._live().reply_stream(frame_of(stream.req_id), stream.id, text, finish=finish))

    # ------------------------------------------------------------------ inbound files

    def fetch_media(self, ref: MediaRef, *, limit: int) -> AbstractAsyncContextManager[MediaStream]:
        """Download an image or file within ``limit`` and decrypt it with its message's key (see :meth:`_fetched`)."""
        return self._fetched(ref, limit)

    @asynccontextmanager
    async def _fetched(self, ref: MediaRef, limit: int) -> AsyncIterator[MediaStream]:
        """Download an image or file within ``limit`` and decrypt it with its message's key.

        AES-CBC ends in padding, so the whole file is read (it is within the fetch limit) before a byte
        is handed on; a file that does not decrypt is refused as ``BadRequest``, never kept as noise."""
        where = Download.load(ref.locator)
        if self._downloads is None:
            self._downloads = httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT, trust_env=False, follow_redirects=True)
        async with download(self._downloads, where.url, limit=limit + 32, platform=PLATFORM, name=ref.name) as got:
            data = b"".join([chunk async for chunk in got.chunks])
            name = got.name
        try:
            plain = decrypt_file(where.aeskey, data) if where.aeskey else data
        except ForgedRequest:
            raise BadRequest(PLATFORM, "the file does not decrypt under its message's key") from None
        if len(plain) > limit:  # the download may run 32 bytes over: the padding is not the file's
            raise TooLarge(PLATFORM, limit, len(plain))
        yield MediaStream(chunks=_once(plain), content_type=sniffed_type(plain, ref.mime_type, name), name=name)

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
        for live in list(self._open.values()):
            self._stop_timer(live)
        client, self._client = self._client, None
        if client is not None:
            await client.disconnect()
        downloads, self._downloads = self._downloads, None
        if downloads is not None:
            await downloads.aclose()


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data
