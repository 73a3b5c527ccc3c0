"""OfficialAccountChannel: a WeChat Official Account (``kind: official_account``, ADR 0033).

Inbound, WeChat POSTs each learner's message to
``/webhooks/weixin/<account>``.  The callback is verified and decrypted
(callback.py), decoded (decode.py), made durable on the kit's ack clock
against WeChat's 5 s, and only then answered ``success`` -- the word that tells
WeChat to stop retrying (X1).  WeChat's retries of one ``MsgId`` land on one
dedup key and are answered once.  The GET WeChat sends when the teacher saves
the server configuration is answered with its ``echostr`` once ``signature``
verifies (the kit's challenge).

Outbound, an answer ready within ``passive_reply_s`` (4.5 s) of the callback
goes back in its own response -- encrypted in safe mode -- and the rest as
customer-service messages (passive.py decides which, exactly once).  Those go
inside the learner's 48-hour window, at most five per message of theirs: both
numbers are the account kind's row in platforms.toml, enforced by the one
outbound path, which records a reply it cannot send and tells the teacher.
WeChat's own word that the window closed (45015, 45047) is the same
``ReplyWindowClosed``.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from typing import TYPE_CHECKING

from channels._kit.ack import AckClock
from channels._kit.challenges import challenge_response, wechat_echostr
from channels._kit.wechat_xml import sealed, write_fields
from channels.base import ChannelContext
from channels.weixin.account import WeixinChannel
from channels.weixin.callback import Callback, CallbackReader
from channels.weixin.config import OfficialAccountConfig, WeixinConfig
from channels.weixin.decode import Skipped, decode
from channels.weixin.passive import PassiveSlots
from channels.weixin.probe import check_settings, probe_account
from channels.weixin.transport import PLATFORM, OfficialAccountApi
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import InvalidEvent, Unsupported
from gateway.core.messages import Address, MessageId, Referrer, RenderedPart, SentMessage
from gateway.core.probes import ProbeResult, Problem

if TYPE_CHECKING:  # pragma: no cover
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger(__name__)
ALIVE_S = 30.0
ANSWER = "success"
"""What WeChat takes as "received, do not retry" (X1)."""


class OfficialAccountChannel(WeixinChannel):
    """Made by ``WeixinChannel(context)`` for an account with ``kind: official_account``."""

    def __init__(self, context: ChannelContext[WeixinConfig]) -> None:
        super().__init__(context)
        if not isinstance(self.settings, OfficialAccountConfig):
            raise Unsupported(PLATFORM, f"kind {self.settings.kind} is not an Official Account")
        self.oa: OfficialAccountConfig = self.settings
        caps = self.declared
        self.callbacks = CallbackReader(self.oa, caps.signature_window_s)
        self.acks = AckClock(PLATFORM, self.account, caps.ack_deadline_s)
        """Times each callback's accept against WeChat's 5 s."""
        self._api: OfficialAccountApi | None = None
        self.passive = PassiveSlots()
        self.passive_s = caps.passive_reply_s if self.oa.passive_reply else None
        """How long a callback waits to carry its answer (platforms.toml); None: every answer is a customer-service message."""

    @property
    def api(self) -> OfficialAccountApi:
        if self._api is None:
            self._api = OfficialAccountApi(self.oa)
        return self._api

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: WeixinConfig) -> list[Problem]:
        return check_settings(settings) if isinstance(settings, OfficialAccountConfig) else []

    async def probe(self) -> ProbeResult:
        return await probe_account(self.oa)

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("weixin official account ready account=%s appid=%s mode=%s", self.account, self.oa.appid, self.oa.mode)
        while True:  # WeChat posts to the webhook; this only shows the account is alive
            heartbeat.beat()
            await asyncio.sleep(ALIVE_S)

    async def verify_webhook(self, request: Request) -> Response:
        return challenge_response(wechat_echostr(request.query_params, self.callbacks.token))

    async def handle_webhook(self, request: Request) -> Response:
        from starlette.responses import PlainTextResponse

        arrived = time.monotonic()
        callback = self.callbacks.read(request.query_params, await request.body())
        try:
            message = decode(callback.fields, account=self.account)
        except Skipped as skipped:
            self.context.sink.refused("weixin-type", f"{callback.fields.get('FromUserName', '')}: {skipped}")
            return PlainTextResponse(ANSWER)
        except InvalidEvent as error:
            self.context.sink.invalid(str(error))
            raise
        key = str(message.event_id)
        given = self.passive.given(key)
        slot = self.passive.open(key) if self.passive_s is not None and given is None else None
        try:
            await self.acks.accept(self.context.sink, [message])
        except BaseException:
            self.passive.close(key)
            raise
        log.info("weixin callback stored account=%s message=%s encrypted=%s", self.account, key, callback.encrypted)
        if given is None and slot is not None and self.passive_s is not None:
            given = await self.passive.wait(key, slot, self.passive_s - (time.monotonic() - arrived))
        if given is None:
            return PlainTextResponse(ANSWER)
        log.info("weixin passive reply account=%s message=%s", self.account, key)
        return self._passive_answer(callback, given, key)

    def _passive_answer(self, callback: Callback, text: str, key: str) -> Response:
        """The reply XML WeChat shows the learner (X1), sealed when the callback came encrypted; once it is
        written, the send that offered it may count it delivered (passive.py)."""
        from starlette.background import BackgroundTask
        from starlette.responses import Response

        document = write_fields({"ToUserName": callback.fields.get("FromUserName", ""),
                                 "FromUserName": callback.fields.get("ToUserName", ""),
                                 "CreateTime": int(time.time()), "MsgType": "text", "Content": text})
        if callback.encrypted and self.callbacks.crypto is not None:
            document = sealed(document, self.callbacks.crypto, self.callbacks.token,
                              timestamp=str(int(time.time())), nonce=secrets.token_hex(8))
        return Response(document, media_type="application/xml", background=BackgroundTask(self.passive.written, key))

    # ------------------------------------------------------------------ outbound

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        """The first part to a callback still waiting for it (passive.py), counted sent once its response is
        written, else one customer-service text message.  WeChat hands back no id for either, so the part's
        key stands for it."""
        if part.attachment is not None or not part.text.strip():
            raise Unsupported(PLATFORM, "this account sends text only")
        if part.index == 0 and referrer.message and self.passive.offer(str(referrer.message), part.text):
            written = await self.passive.handed_over(str(referrer.message))
            log.info("weixin answered in the callback account=%s chat=%s written=%s", self.account,
                     target.conversation.chat, written)
            return SentMessage(message=MessageId(idempotency_key))
        await self.api.send_text(target.conversation.chat, part.text)
        log.info("weixin sent account=%s chat=%s part=%d", self.account, target.conversation.chat, part.index)
        return SentMessage(message=MessageId(idempotency_key))

    async def close(self) -> None:
        if self._api is not None:
            api, self._api = self._api, None
            await api.close()
