"""WecomAppChannel: a WeCom self-built app (自建应用, ``kind: app``, ADR 0034).

Inbound, WeCom POSTs each member's message to ``/webhooks/wecom/<account>``,
encrypted.  The callback is verified and decrypted, decoded (app_callback.py),
made durable on the kit's ack clock against WeCom's 5 s, and only then answered
with an empty 200 -- which tells WeCom to stop retrying (W2).  WeCom's retries
of one ``MsgId`` land on one dedup key and are answered once.  The GET WeCom
sends when the admin saves the API receive settings is answered with the
plaintext of its encrypted ``echostr`` once ``msg_signature`` verifies.

Outbound, every part is one text app message (``cgi-bin/message/send``,
app_api.py).  An app may message a member at any time, so there is no reply
window; the 2,048-byte text limit is the kind's row in platforms.toml, which
the one outbound path splits by (in bytes: a Chinese character is three).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from channels._kit.ack import AckClock
from channels._kit.challenges import challenge_response
from channels.base import ChannelContext
from channels.wecom.app_api import PLATFORM, AppApi
from channels.wecom.app_callback import AppCallbacks, Skipped, decode
from channels.wecom.channel import WecomChannel
from channels.wecom.config import AppMode, WecomConfig
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import InvalidEvent, Unsupported
from gateway.core.messages import Address, MessageId, Referrer, RenderedPart, SentMessage, StreamHandle
from gateway.core.probes import ProbeResult, Problem

if TYPE_CHECKING:  # pragma: no cover
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger(__name__)
ALIVE_S = 30.0


class WecomAppChannel(WecomChannel):
    """Made by ``WecomChannel(context)`` for an account with ``kind: app``."""

    def __init__(self, context: ChannelContext[WecomConfig]) -> None:
        super().__init__(context)
        self.app: AppMode = self.settings.app
        caps = self.declared
        self.callbacks = AppCallbacks(self.app, caps.signature_window_s)
        self.acks = AckClock(PLATFORM, self.account, caps.ack_deadline_s)
        self._api: AppApi | None = None

    @property
    def api(self) -> AppApi:
        if self._api is None:
            self._api = AppApi(self.app)
        return self._api

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("wecom app ready account=%s corpid=%s agentid=%s", self.account, self.app.corpid, self.app.agentid)
        while True:  # WeCom posts to the webhook; this only shows the account is alive
            heartbeat.beat()
            await asyncio.sleep(ALIVE_S)

    async def verify_webhook(self, request: Request) -> Response:
        return challenge_response(self.callbacks.echo(request.query_params))

    async def handle_webhook(self, request: Request) -> Response:
        from starlette.responses import Response

        fields = self.callbacks.read(request.query_params, await request.body())
        try:
            message = decode(fields, account=self.account)
        except Skipped as skipped:
            self.context.sink.refused("wecom-msgtype", f"{fields.get('FromUserName', '')[:64]}: {skipped}")
            return Response(b"")
        except InvalidEvent as error:
            self.context.sink.invalid(str(error))
            raise
        await self.acks.accept(self.context.sink, [message])
        log.info("wecom app callback stored account=%s message=%s", self.account, message.event_id)
        return Response(b"")  # empty 200: received, do not retry (W2)

    # ------------------------------------------------------------------ outbound

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        if part.attachment is not None or not part.text.strip():
            raise Unsupported(PLATFORM, "this app sends text only")
        msgid = await self.api.send_text(str(target.conversation.chat), part.text)
        log.info("wecom app sent account=%s chat=%s part=%d", self.account, target.conversation.chat, part.index)
        return SentMessage(message=MessageId(msgid or idempotency_key))

    async def start(self, target: Address, referrer: Referrer, key: str) -> StreamHandle:
        raise Unsupported(PLATFORM, "a self-built app's messages are not edited, so nothing streams")

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check_app(cls, settings: WecomConfig) -> list[Problem]:
        mode, problems = settings.app, []
        if not mode.corpsecret.get_secret_value().strip():
            problems.append(Problem(message="the app's Secret is empty",
                                    fix="copy the Secret from the app's page (应用管理 → the app) into the environment"))
        if not mode.token.get_secret_value().strip():
            problems.append(Problem(message="the app's Token is empty",
                                    fix="copy the Token from the app's API receive settings (设置API接收)"))
        return problems

    async def probe(self) -> ProbeResult:
        """Fetch an ``access_token``: a wrong corpid or Secret, or a caller not on the trusted IPs, shows now."""
        problems = list(self.check(self.settings))
        if not problems:
            try:
                await self.api.token()
            except Exception as error:  # every failure is the probe's finding, not a crash
                problems.append(Problem(message=f"cgi-bin/gettoken failed: {error}",
                                        fix="check corpid, the app's Secret and the app's trusted IPs (企业可信IP)"))
        return ProbeResult(checked="cgi-bin/gettoken with corpid and the app's Secret", problems=tuple(problems))

    async def close(self) -> None:
        if self._api is not None:
            api, self._api = self._api, None
            await api.close()
