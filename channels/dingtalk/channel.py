"""DingtalkChannel: one DingTalk app's robot, in Stream mode or by HTTP callback.

Inbound in Stream mode (the default), the kit's websocket :class:`~channels._kit.websocket.Session` owns the
socket (ADR 0043): each connection starts with a ticket from
``gateway/connections/open`` (dingtalk-stream's call, in a worker thread), then
DingTalk pushes every message said to the robot -- a direct chat, or an
@-message in a group -- as a CALLBACK frame, acked only once the message is in
the inbox.  A drop is dialled again by the session's short backoff, then by the
supervisor's restart; the SDK's own ``start()`` loop, which swallows
cancellation and dials again every 10 s for ever, is never run, so ``run``
stops when it is cancelled.  In HTTP mode (``mode: http``) DingTalk POSTs each
message to the webhook instead: checked (callback.py), made durable on the
kit's ack clock, then answered 200 -- the same decoder, the same dedup key.

Outbound, an answer goes through the learner's ``sessionWebhook`` while it is
open (its end is in the reply token), else -- and when the webhook refuses it --
through the robot's proactive API (``oToMessages/batchSend`` to a learner,
``groupMessages/send`` to a group), as Markdown.  With ``card_template_id`` set,
answers stream into an AI card (``createAndDeliver``, then ``PUT
card/streaming``); without, they are sent once, complete.  A group's 20
messages a minute are paced by the outbound path (``send_rate_chat``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, ClassVar

import httpx

from channels._kit.ack import AckClock
from channels._kit.websocket import Session
from channels.base import Channel, ChannelContext
from channels.dingtalk.callback import CallbackReader
from channels.dingtalk.config import DingtalkConfig
from channels.dingtalk.decode import Skipped
from channels.dingtalk.encode import (
    Card,
    ReplyToken,
    card_create,
    card_stream,
    proactive_markdown,
    track_id,
    webhook_markdown,
)
from channels.dingtalk.transport import PLATFORM, Api, open_ticket
from channels.dingtalk.wire import StreamProtocol
from gateway.core.capabilities import ChannelCapabilities, EditMode, capabilities_of
from gateway.core.channel import ChannelState, Heartbeat, MediaStream
from gateway.core.errors import BadRequest, InvalidEvent, NotFound, PeerUnavailable, RateLimited, ReplyWindowClosed, Unsupported
from gateway.core.messages import (
    Address,
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

if TYPE_CHECKING:  # pragma: no cover
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger(__name__)
PING_S = 30.0
ALIVE_S = 30.0
CARD_CREATE = "/v1.0/card/instances/createAndDeliver"
CARD_STREAM = "/v1.0/card/streaming"


class DingtalkChannel(Channel[DingtalkConfig]):
    name: ClassVar[str] = "dingtalk"
    config_model = DingtalkConfig

    @classmethod
    def capabilities_for(cls, settings: DingtalkConfig) -> ChannelCapabilities:
        """Streaming only where the app has an AI card template; else the final text only."""
        declared = capabilities_of(cls.name)
        return declared if settings.streams_cards else declared.model_copy(update={"edit_mode": EditMode.NONE})

    def __init__(self, context: ChannelContext[DingtalkConfig]) -> None:
        super().__init__(context)
        self._http: httpx.AsyncClient | None = None
        self._api: Api | None = None
        self.callbacks = CallbackReader(self.settings.client_secret.get_secret_value(), self.account,
                                        window_s=self.declared.signature_window_s)
        self.acks = AckClock.of(PLATFORM, self.account)
        """Times each HTTP callback's accept against DingTalk's deadline."""

    @property
    def api(self) -> Api:
        if self._api is None:
            self._http = httpx.AsyncClient(trust_env=False)
            self._api = Api(self.settings, self._http)
        return self._api

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        if self.settings.mode == "http":
            await self._serve_callbacks(heartbeat)
            return

        async def endpoint() -> str:
            try:
                return await open_ticket(self.settings)
            except PeerUnavailable:
                await self.api.token()  # the SDK says only "failed": refused credentials are AuthFailed, for a human
                raise

        protocol = StreamProtocol(self.account, endpoint, heartbeat_interval=PING_S, refused=self.context.sink.refused)
        log.info("dingtalk stream connecting account=%s client=%s", self.account, self.settings.client_id)
        await Session(protocol, sink=self.context.sink, cursors=self.context.cursors, heartbeat=heartbeat,
                      what=f"dingtalk/{self.account}", open_timeout=self.settings.connect_timeout_s).run()

    async def _serve_callbacks(self, heartbeat: Heartbeat) -> None:
        """HTTP mode: DingTalk posts to the webhook, so this only shows the account is alive."""
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("dingtalk http callbacks ready account=%s path=/webhooks/dingtalk/%s", self.account, self.account)
        while True:
            heartbeat.beat()
            await asyncio.sleep(ALIVE_S)

    async def handle_webhook(self, request: Request) -> Response:
        """One HTTP callback: checked, then durable, then 200 (the reply follows through the send path)."""
        if self.settings.mode != "http":
            raise Unsupported(PLATFORM, "this account hears DingTalk in Stream mode (mode: stream), not by HTTP callback")
        try:
            message = self.callbacks.read(request.headers, await request.body())
        except Skipped as skipped:
            self.context.sink.refused("dingtalk-msgtype", str(skipped))
            return await self.acks.accept_then_answer(self.context.sink, [])
        except InvalidEvent as error:
            self.context.sink.invalid(str(error))
            raise
        response = await self.acks.accept_then_answer(self.context.sink, [message])
        log.info("dingtalk callback stored account=%s message=%s", self.account, message.event_id)
        return response

    def fetch_media(self, ref: MediaRef, *, limit: int) -> AbstractAsyncContextManager[MediaStream]:
        """A learner's picture or file, by the ``downloadCode`` decode kept (after the ack, never on it)."""
        return self.api.open_file(ref.locator, limit=limit, name=ref.name)

    # ------------------------------------------------------------------ outbound

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        """One Markdown message: through the session webhook while it is open, else the proactive API."""
        token = ReplyToken.load(referrer.token)
        if token is not None and token.open_at():
            try:
                await self.api.webhook(token.webhook, webhook_markdown(part.text))
                log.info("dingtalk sent account=%s chat=%s part=%d via=webhook", self.account,
                         target.conversation.chat, part.index)
                return SentMessage(message=MessageId(track_id(idempotency_key)))
            except (ReplyWindowClosed, NotFound, BadRequest) as refused:
                log.info("dingtalk session webhook refused, sending by the robot account=%s reason=%s",
                         self.account, refused)
        return await self._proactive(target, part.text, idempotency_key)

    async def _proactive(self, target: Address, text: str, key: str) -> SentMessage:
        chat, group = str(target.conversation.chat), target.conversation.kind is ConversationKind.GROUP
        path, body = proactive_markdown(self.settings.robot_code, chat, group=group, text=text)
        answer: dict[str, Any] = await self.api.call(path, body) or {}
        if chat in (answer.get("flowControlledStaffIdList") or []):
            raise RateLimited(PLATFORM, retry_after=60.0)
        if chat in (answer.get("invalidStaffIdList") or []):
            raise NotFound(PLATFORM, f"{path}: the learner is not in the app's organization")
        log.info("dingtalk sent account=%s chat=%s via=robot", self.account, chat)
        return SentMessage(message=MessageId(str(answer.get("processQueryKey") or track_id(key))))

    async def start(self, target: Address, referrer: Referrer, key: str) -> StreamHandle:
        """An AI card in the chat, empty, under an ``outTrackId`` made from the reply's key."""
        if not self.settings.streams_cards:
            raise Unsupported(PLATFORM, "no AI card template is set (card_template_id): answers are sent complete")
        card = Card(track_id(key), self.settings.card_content_key)
        chat, group = str(target.conversation.chat), target.conversation.kind is ConversationKind.GROUP
        await self.api.call(CARD_CREATE, card_create(self.settings.card_template_id, card, self.settings.robot_code,
                                                     chat, group=group))
        return StreamHandle(target=target, referrer=referrer, handle=card.dump())

    async def append(self, stream: StreamHandle, chunk: StreamChunk) -> None:
        card = Card.load(stream.handle)
        await self.api.call(CARD_STREAM, card_stream(card, chunk.so_far.text, final=False, guid=uuid.uuid4().hex),
                            method="PUT")

    async def finish(self, stream: StreamHandle, final: RenderedPart) -> SentMessage:
        card = Card.load(stream.handle)
        await self.api.call(CARD_STREAM, card_stream(card, final.text, final=True, guid=uuid.uuid4().hex), method="PUT")
        log.info("dingtalk card finished account=%s chat=%s card=%s", self.account,
                 stream.target.conversation.chat, card.track)
        return SentMessage(message=MessageId(card.track), handle=stream.handle)

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: DingtalkConfig) -> list[Problem]:
        problems = []
        if not settings.client_secret.get_secret_value().strip():
            problems.append(Problem(message="the app's Client Secret is empty",
                                    fix="copy the Client Secret from the app's Credentials page into the environment"))
        return problems

    async def probe(self) -> ProbeResult:
        """The credentials, by getting an access token (the stream's own ticket is one-time and not spent here)."""
        problems = self.check(self.settings)
        if not problems:
            try:
                await self.api.token()
            except Exception as error:
                problems.append(Problem(message=f"DingTalk refused the app's credentials: {error}",
                                        fix="check client_id and client_secret on the app's Credentials page"))
        return ProbeResult(checked="the app's credentials (access token)", problems=tuple(problems))

    async def close(self) -> None:
        http, self._http, self._api = self._http, None, None
        if http is not None:
            await http.aclose()
