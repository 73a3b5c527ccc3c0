"""FeishuChannel: one Feishu or Lark app's bot, on the long connection (default) or the event webhook.

Inbound, with ``inbound: socket`` lark-oapi's long connection (socket.py) is handed every
``im.message.receive_v1`` event; with ``inbound: webhook`` Feishu POSTs them to
``/webhooks/feishu/<account>`` (webhook.py checks them).  Either way each event is decoded, made durable
on the kit's ack clock against Feishu's 3 s, and only then acknowledged -- the frame's ack, or the 200.
An event Feishu delivers again carries the same ``event_id`` and is answered once.  Files are fetched
after the ack (``fetch_media``).  The bot's own open_id, asked once at start (``bot/v3/info``), says
which mention in a group is the bot's.

Outbound, an answer replies to the learner's message (in its thread when it was in one, or always in
groups with ``reply_in_thread``), mentioning the asker in groups.  Streamed, it is a CardKit card in
streaming mode: ``start`` makes the card and the reply showing it, ``append`` replaces the card's text
(the outbound path paces it to ``min_edit_interval`` in platforms.toml, within Feishu's 5 per second per
message), ``finish`` writes the final text and ends streaming mode.  Unstreamed (``stream: false``),
it is rich text.  Images and files are uploaded and sent as image and file messages.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import mimetypes
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from channels._kit.ack import AckClock
from channels._kit.challenges import challenge_json
from channels.base import Channel, ChannelContext
from channels.feishu.api import PLATFORM, FeishuApi
from channels.feishu.config import FeishuConfig
from channels.feishu.decode import Skipped, decode
from channels.feishu.encode import ELEMENT, Card, card_message, link_post, post, streaming_card, uuid_of
from channels.feishu.socket import LongConnection
from channels.feishu.webhook import Webhook
from gateway.core.capabilities import EditMode
from gateway.core.channel import ChannelState, Heartbeat, MediaStream
from gateway.core.errors import BadRequest, ChannelUnavailable, InvalidEvent, PeerUnavailable, ReplyWindowClosed, Unsupported
from gateway.core.messages import (
    Address,
    Attachment,
    ConversationKind,
    MediaRef,
    MessageId,
    Referrer,
    RenderedPart,
    SentMessage,
    StreamChunk,
    StreamHandle,
)
from gateway.core.probes import ProbeResult, Problem
from gateway.extras import install_command

if TYPE_CHECKING:  # pragma: no cover
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger(__name__)
ALIVE_CHECK_S = 1.0
OPENING = "cards-opening"
"""The account's cursor entry naming, per reply key, the card made for it: ``{key: [card id, born ms]}``."""
OPENING_KEPT = 256
"""How many of the latest replies' cards the entry remembers: far more than are ever opening at once."""


class FeishuChannel(Channel[FeishuConfig]):
    name: ClassVar[str] = "feishu"
    config_model = FeishuConfig

    def __init__(self, context: ChannelContext[FeishuConfig]) -> None:
        super().__init__(context)
        self.acks = AckClock.of(PLATFORM, self.account)
        self.webhook = Webhook(self.settings, self.declared.signature_window_s)
        self._api: FeishuApi | None = None
        self._socket: LongConnection | None = None
        self._heartbeat: Heartbeat | None = None
        self.bot = ""
        self._sequences: dict[str, int] = {}
        self._opening = asyncio.Lock()
        """Guards :attr:`_cards` and its write to :data:`OPENING` in the account's cursors."""
        self._cards: dict[str, list[Any]] | None = None
        """:data:`OPENING`, read from the cursors once per process, then kept here and written through."""

    @property
    def api(self) -> FeishuApi:
        if self._api is None:
            self._api = FeishuApi(self.settings)
        return self._api

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        self._heartbeat = heartbeat
        self.bot = await self.api.bot_open_id()
        if self.settings.inbound == "webhook":
            heartbeat.set_state(ChannelState.RUNNING)
            log.info("feishu webhook ready account=%s app=%s", self.account, self.settings.app_id)
            while True:  # Feishu posts to the webhook; this only shows the account is alive
                heartbeat.beat()
                await asyncio.sleep(30.0)
        if importlib.util.find_spec("lark_oapi") is None:
            raise ChannelUnavailable(f"feishu/{self.account}: the long connection needs the feishu extra: {install_command('feishu')}")
        self._socket = connection = LongConnection(self.settings, self._on_event)
        connection.start()
        try:
            deadline = time.monotonic() + self.settings.connect_timeout_s
            while not connection.connected:
                if connection.ended or time.monotonic() > deadline:
                    raise connection.failure or PeerUnavailable(
                        PLATFORM, f"no long connection within {self.settings.connect_timeout_s:g} s")
                await asyncio.sleep(0.05)
            heartbeat.set_state(ChannelState.RUNNING)
            log.info("feishu long connection open account=%s app=%s", self.account, self.settings.app_id)
            while connection.connected:
                heartbeat.beat()
                await asyncio.sleep(ALIVE_CHECK_S)
            raise connection.failure or PeerUnavailable(PLATFORM, "the long connection closed")
        finally:
            self._socket = None
            await connection.close()

    async def _on_event(self, raw: dict[str, Any]) -> None:
        """Every event from either way in: decode, make durable; only then is it acknowledged."""
        try:
            message = decode(raw, account=self.account, bot=self.bot)
        except Skipped as skipped:
            self.context.sink.refused("feishu-event", str(skipped))
            return
        except InvalidEvent as error:
            self.context.sink.invalid(str(error))
            raise
        await self.acks.accept(self.context.sink, [message])
        log.info("feishu message in account=%s chat=%s event=%s", self.account,
                 message.address.conversation.chat, message.event_id)
        if self._heartbeat is not None:
            self._heartbeat.event()

    async def handle_webhook(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if self.settings.inbound != "webhook":
            raise Unsupported(PLATFORM, "this account uses the long connection (inbound: socket), not the webhook")
        challenge, event, _ = self.webhook.read(request.headers, await request.body())
        if challenge is not None:
            return challenge_json(challenge)
        await self._on_event(event)
        return JSONResponse({})

    def fetch_media(self, ref: MediaRef, *, limit: int) -> AbstractAsyncContextManager[MediaStream]:
        return self.api.open_resource(ref.locator, limit=limit, name=ref.name)

    # ------------------------------------------------------------------ outbound

    def stream_mode(self, target: Address) -> EditMode:
        return self.declared.edit_mode if self.settings.stream else EditMode.NONE

    def _where(self, target: Address, referrer: Referrer) -> tuple[str | None, bool, str | None]:
        """(message to reply to, in its thread, the asker to mention)."""
        group = target.conversation.kind is ConversationKind.GROUP
        thread = bool(target.conversation.thread) or (group and self.settings.reply_in_thread)
        return (str(referrer.message) if referrer.message else None), thread, (referrer.token if group else None)

    async def _send(self, target: Address, referrer: Referrer, msg_type: str, content: dict[str, Any], uuid: str) -> str:
        """A reply to the learner's message, or to the chat when that message is gone (withdrawn)."""
        reply_to, thread, _ = self._where(target, referrer)
        chat = str(target.conversation.chat)
        if reply_to:
            try:
                return await self.api.send(chat, msg_type, content, uuid=uuid, reply_to=reply_to, in_thread=thread)
            except ReplyWindowClosed as closed:
                log.info("feishu reply target gone, sending to the chat account=%s chat=%s reason=%s", self.account, chat, closed)
        return await self.api.send(chat, msg_type, content, uuid=uuid)

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        uuid = uuid_of(idempotency_key)
        attachment = part.attachment
        if attachment is not None and attachment.path:
            kind, key = await self._upload(attachment)
            message = await self._send(target, referrer, kind, {f"{kind}_key": key}, uuid)
        elif attachment is not None and attachment.url:
            message = await self._send(target, referrer, "post", link_post(attachment.name, attachment.url), uuid)
        elif attachment is None and part.text.strip():
            mention = self._where(target, referrer)[2] if part.index == 0 else None
            message = await self._send(target, referrer, "post", post(part.text, mention=mention), uuid)
        else:
            raise Unsupported(PLATFORM, "a part with neither text nor one file cannot be sent")
        log.info("feishu sent account=%s chat=%s part=%d file=%s", self.account, target.conversation.chat, part.index,
                 attachment is not None)
        return SentMessage(message=MessageId(message or uuid))

    async def _upload(self, attachment: Attachment) -> tuple[str, str]:
        path = Path(attachment.path or "")
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as error:
            raise BadRequest(PLATFORM, f"the attachment cannot be read ({error.strerror})") from None
        name = attachment.name or path.name
        mime = attachment.mime_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
        kind = "image" if attachment.kind == "image" and mime.startswith("image/") else "file"
        return kind, await self.api.upload(kind, name, data, mime)

    async def start(self, target: Address, referrer: Referrer, key: str) -> StreamHandle:
        """The card (in streaming mode) and the reply showing it, both keyed by the reply: a restart finds them."""
        if not self.settings.stream:
            raise Unsupported(PLATFORM, "this account sends final answers only (stream: false)")
        card_id, born_ms = await self._card_for(key, mention=self._where(target, referrer)[2])
        message = await self._send(target, referrer, "interactive", card_message(card_id), uuid_of(key, "card"))
        card = Card(id=card_id, message=message, born_ms=born_ms)
        log.info("feishu card opened account=%s chat=%s card=%s", self.account, target.conversation.chat, card_id)
        return StreamHandle(target=target, referrer=referrer, handle=card.dump())

    async def _card_for(self, key: str, *, mention: str | None) -> tuple[str, int]:
        """The card this reply streams into, kept durable *before* the message showing it is sent.

        CardKit takes no idempotency key for a new card, while the message showing it is deduplicated
        by its uuid.  A process killed after that send but before the stream's handle was kept would,
        on restart, make a second card and send again: Feishu would drop the repeat and keep showing
        the first card, left streaming for ever, while the answer went into a card nobody sees.  So
        the card made for a reply is remembered first, and a restart streams into the same one (with
        its birth time, so its sequences keep rising)."""
        async with self._opening:
            if self._cards is None:
                self._cards = json.loads(await self.context.cursors.get(OPENING) or "{}")
            known = self._cards.get(key)
        if isinstance(known, list) and len(known) == 2:
            return str(known[0]), int(known[1])
        card_id, born_ms = await self.api.create_card(streaming_card("", mention=mention)), int(time.time() * 1000)
        async with self._opening:
            self._cards[key] = [card_id, born_ms]
            self._cards = dict(list(self._cards.items())[-OPENING_KEPT:])
            await self.context.cursors.put(OPENING, json.dumps(self._cards))
        return card_id, born_ms

    def _sequence(self, card: Card) -> int:
        """Strictly increasing per card, across restarts: milliseconds since the card was made."""
        sequence = max(int(time.time() * 1000) - card.born_ms, self._sequences.get(card.id, 0) + 1, 1)
        self._sequences[card.id] = sequence
        return sequence

    async def append(self, stream: StreamHandle, chunk: StreamChunk) -> None:
        card = Card.load(stream.handle)
        sequence = self._sequence(card)
        await self.api.card_text(card.id, ELEMENT, chunk.so_far.text, sequence=sequence, uuid=uuid_of(card.id, sequence))

    async def finish(self, stream: StreamHandle, final: RenderedPart) -> SentMessage:
        card = Card.load(stream.handle)
        sequence = self._sequence(card)
        await self.api.card_text(card.id, ELEMENT, final.text, sequence=sequence, uuid=uuid_of(card.id, "final"))
        sequence = self._sequence(card)
        await self.api.card_settings(card.id, {"streaming_mode": False}, sequence=sequence, uuid=uuid_of(card.id, "close"))
        self._sequences.pop(card.id, None)
        log.info("feishu card finished account=%s card=%s", self.account, card.id)
        return SentMessage(message=MessageId(card.message or card.id), handle=stream.handle)

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: FeishuConfig) -> list[Problem]:
        problems = []
        if settings.inbound == "socket" and importlib.util.find_spec("lark_oapi") is None:
            problems.append(Problem(message="lark-oapi is not installed", fix=f"install the extra ({install_command('feishu')}), "
                                                         "or use inbound: webhook, which needs no SDK"))
        if not settings.app_secret.get_secret_value().strip():
            problems.append(Problem(message="the App Secret is empty",
                                    fix="copy the App Secret from Credentials & Basic Info into the environment"))
        if not settings.api_base.startswith(("https://", "http://")):
            problems.append(Problem(message=f"domain {settings.domain!r} is neither feishu, lark nor a URL",
                                    fix="use domain: feishu (open.feishu.cn) or domain: lark (open.larksuite.com)"))
        return problems

    async def probe(self) -> ProbeResult:
        """Fetch a tenant access token and the bot's info: a wrong App ID or Secret, or a bot not enabled, shows now."""
        problems = list(self.check(self.settings))
        if not problems:
            try:
                if not await self.api.bot_open_id():
                    problems.append(Problem(message="the app has no bot", fix="enable the Bot feature under Features → Bot"))
            except Exception as error:  # every failure is the probe's finding, not a crash
                problems.append(Problem(message=f"tenant_access_token or bot/v3/info failed: {error}",
                                        fix="check app_id and app_secret, and domain (feishu or lark)"))
        return ProbeResult(checked="tenant_access_token and bot/v3/info with the App ID and Secret", problems=tuple(problems))

    async def close(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            await socket.close()
        if self._api is not None:
            api, self._api = self._api, None
            await api.close()
