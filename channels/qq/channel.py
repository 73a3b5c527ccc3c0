"""QQChannel: a bot on QQ's official API, reached by signed webhook or QQ's websocket gateway (ADR 0044).

Inbound (``mode: webhook``, the default), QQ POSTs each event to ``/webhooks/qq/<account>``.  The request is
verified first (webhook.py: Ed25519, seeded from the AppSecret); the URL
validation the open platform sends when the teacher saves the callback address
(op 13) is answered with our signature; a dispatch (op 0) is decoded
(decode.py), made durable on the kit's ack clock against QQ's 3 s, and only
then answered op 12.  QQ's repeats of one message land on one dedup key.
With ``mode: websocket`` the kit's session dials QQ's gateway instead
(wire.py) and hands each dispatch to the same decode; the sequence stored
once the event is durable is what a resume names.

Outbound, every message answers a learner's (QQ took no unasked message after
2025-04-21): the window (60 min direct, 5 min group) and the five replies per
message are platforms.toml's row, enforced by the one outbound path, which
records a reply it cannot send and tells the teacher; QQ's own 22009 is the
same ``ReplyWindowClosed``.  Each part's ``msg_seq`` comes from its
idempotency key (transport.py), so a resend after a crash is shown once.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, ClassVar

from channels._kit.ack import AckClock
from channels._kit.websocket import Session
from channels.base import Channel, ChannelContext
from channels.qq.config import QQConfig
from channels.qq.decode import Skipped, decode
from channels.qq.transport import PLATFORM, QQApi
from channels.qq.webhook import ACK, DISPATCH, VALIDATION, Payload, WebhookReader
from channels.qq.wire import QQWire
from gateway.core.channel import ChannelState, Heartbeat, MediaStream
from gateway.core.errors import AuthFailed, GatewayError, InvalidEvent, PeerUnreachable, ReplyWindowClosed, Unsupported
from gateway.core.messages import Address, InboundMessage, MediaRef, MessageId, Referrer, RenderedPart, SentMessage
from gateway.core.probes import ProbeResult, Problem
from gateway.endpoints import origin

if TYPE_CHECKING:  # pragma: no cover
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger(__name__)
ALIVE_S = 30.0
CONSOLE = "q.qq.com, Development → Development settings"


class QQChannel(Channel[QQConfig]):
    name: ClassVar[str] = "qq"
    config_model = QQConfig

    def __init__(self, context: ChannelContext[QQConfig]) -> None:
        super().__init__(context)
        caps = self.declared
        self.webhooks = WebhookReader(self.settings, caps.signature_window_s)
        self.acks = AckClock(PLATFORM, self.account, caps.ack_deadline_s)
        """Times each event's accept against QQ's 3 s."""
        self._api: QQApi | None = None

    @property
    def api(self) -> QQApi:
        if self._api is None:
            self._api = QQApi(self.settings)
        return self._api

    # ------------------------------------------------------------------ doctor

    async def probe(self) -> ProbeResult:
        """A token and ``GET /users/@me``: proves AppID, AppSecret and the IP allow-list at once."""
        where = f"QQ bot {self.settings.app_id} at {origin(self.settings.api_base)}"
        api = QQApi(self.settings)
        try:
            me = await api.me()
            if self.settings.mode == "websocket":
                await api.gateway()
        except PeerUnreachable as error:
            return ProbeResult.failed(where, f"nothing answers at {error.endpoint} ({error.why})",
                                      "check the network, api_base and token_url")
        except AuthFailed as error:
            return ProbeResult.failed(where, f"QQ refuses the bot's credentials ({error.code})",
                                      f"copy AppID and AppSecret again from {CONSOLE}, and add this machine's "
                                      "public IP address to the IP allow-list (IP白名单)")
        except GatewayError as error:
            return ProbeResult.failed(where, f"QQ answered {getattr(error, 'code', '') or 'an error'}",
                                      "try again in a minute; if it lasts, check api_base")
        finally:
            await api.close()
        name = str(me.get("username") or "")
        return ProbeResult(checked=f"QQ bot {name or self.settings.app_id} at {origin(self.settings.api_base)}")

    @classmethod
    def check(cls, settings: QQConfig) -> list[Problem]:
        if not settings.api_base.startswith(("http://", "https://")):
            return [Problem(message=f"api_base {settings.api_base!r} is not an http(s) address",
                            fix="remove api_base to use QQ's own")]
        return []

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        if self.settings.mode == "websocket":
            log.info("qq gateway connecting account=%s app_id=%s sandbox=%s", self.account, self.settings.app_id,
                     self.settings.sandbox)
            await Session(QQWire(self.api, self.messages), sink=self.context.sink, cursors=self.context.cursors,
                          heartbeat=heartbeat, what=f"qq/{self.account}").run()
            return
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("qq bot ready account=%s app_id=%s sandbox=%s", self.account, self.settings.app_id,
                 self.settings.sandbox)
        while True:  # QQ posts to the webhook; this only shows the account is alive
            heartbeat.beat()
            await asyncio.sleep(ALIVE_S)

    def messages(self, payload: Payload) -> tuple[InboundMessage, ...]:
        """A dispatch's learner message, by either way in; none (recorded as refused) for any other event."""
        try:
            return (decode(payload.t, payload.d, account=self.account),)
        except Skipped as skipped:
            self.context.sink.refused("qq-type", str(skipped))
            return ()

    async def handle_webhook(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        if self.settings.mode != "webhook":
            raise Unsupported(PLATFORM, "this account hears QQ on the websocket gateway (mode: websocket), not by webhook")
        try:
            payload = self.webhooks.read(request.headers, await request.body())
        except InvalidEvent as error:
            self.context.sink.invalid(str(error))
            raise
        if payload.op == VALIDATION:
            log.info("qq callback address validated account=%s", self.account)
            return JSONResponse(self.webhooks.validation_answer(payload))
        if payload.op != DISPATCH:
            self.context.sink.refused("qq-op", f"op {payload.op}")
            return JSONResponse(ACK)
        try:
            messages = self.messages(payload)
        except InvalidEvent as error:
            self.context.sink.invalid(str(error))
            raise
        if messages:
            await self.acks.accept(self.context.sink, list(messages))
            log.info("qq event stored account=%s type=%s message=%s", self.account, payload.t, messages[0].event_id)
        return JSONResponse(ACK)

    # ------------------------------------------------------------------ outbound

    def fetch_media(self, ref: MediaRef, *, limit: int) -> AbstractAsyncContextManager[MediaStream]:
        """A learner's picture, file or voice note, from the URL its event named (after the ack)."""
        return self.api.open_file(ref.locator, limit=limit, name=ref.name, declared_type=ref.mime_type)

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        """One text message answering the learner's ``referrer.message`` (QQ takes no other)."""
        if part.attachment is not None or not part.text.strip():
            raise Unsupported(PLATFORM, "this release sends text only")
        if not referrer.message:
            raise ReplyWindowClosed(PLATFORM, "QQ takes no message that answers no learner's message")
        sent = await self.api.reply(target.conversation.chat, part.text, msg_id=str(referrer.message),
                                    key=idempotency_key)
        log.info("qq sent account=%s chat=%s part=%d", self.account, target.conversation.chat, part.index)
        return SentMessage(message=MessageId(sent))

    async def close(self) -> None:
        if self._api is not None:
            api, self._api = self._api, None
            await api.close()
