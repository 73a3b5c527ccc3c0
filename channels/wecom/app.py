"""WecomAppChannel: a WeCom self-built app (自建应用, ``kind: app``, ADR 0034).

Inbound, WeCom POSTs each member's message to ``/webhooks/wecom/<account>``,
encrypted.  The callback is verified and decrypted, decoded (app_callback.py),
made durable on the kit's ack clock against WeCom's 5 s, and only then answered
with an empty 200 -- which tells WeCom to stop retrying (W2).  WeCom's retries
of one ``MsgId`` land on one dedup key and are answered once.  The GET WeCom
sends when the admin saves the API receive settings is answered with the
plaintext of its encrypted ``echostr`` once ``msg_signature`` verifies.

A learner's image, voice message or video is fetched after the ack, by its
``MediaId`` (``fetch_media``, ``cgi-bin/media/get``).

Outbound, every text part is one text app message (``cgi-bin/message/send``,
app_api.py); every image or file part is uploaded (``cgi-bin/media/upload``) and
sent as one image or file message naming the ``media_id``.  An upload that
fails sends nothing, so the outbound path's retry of the part sends it once.
An attachment known only by its URL goes as a news card (图文) that opens it,
showing it when it is an image: WeCom uploads need the bytes, and the gateway
fetches no URL a model wrote.  An app may message a member at any time, so there is no reply
window; the 2,048-byte text limit is the kind's row in platforms.toml, which
the one outbound path splits by (in bytes: a Chinese character is three).
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from channels._kit.ack import AckClock
from channels._kit.challenges import challenge_response
from channels.base import ChannelContext
from channels.wecom.app_api import PLATFORM, AppApi
from channels.wecom.app_callback import AppCallbacks, Skipped, decode
from channels.wecom.channel import WecomChannel
from channels.wecom.config import AppMode, WecomConfig
from gateway.core.channel import ChannelState, Heartbeat, MediaStream
from gateway.core.errors import BadRequest, InvalidEvent, Unsupported
from gateway.core.messages import (
    Address,
    Attachment,
    MediaRef,
    MessageId,
    Referrer,
    RenderedPart,
    SentMessage,
    StreamHandle,
)
from gateway.core.probes import ProbeResult, Problem

if TYPE_CHECKING:  # pragma: no cover
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger(__name__)
ALIVE_S = 30.0
NEWS_TITLE_CHARS = 40
"""A news card's title is at most 128 bytes; 40 characters fit in it even when each is three (CJK)."""
IMAGE_TYPES = frozenset({"image/jpeg", "image/jpg", "image/png"})
"""What an image message may be (JPG, PNG: WeCom's upload limits); any other picture goes as a file."""


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

    def fetch_media(self, ref: MediaRef, *, limit: int) -> AbstractAsyncContextManager[MediaStream]:
        return self.api.open_media(ref.locator, limit=limit, declared_type=ref.mime_type, name=ref.name)

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        member, attachment = str(target.conversation.chat), part.attachment
        if attachment is not None and attachment.path:
            msgid = await self._send_file(member, attachment)
        elif attachment is not None and attachment.url:
            title = (attachment.name or attachment.url.rsplit("/", 1)[-1] or attachment.url)[:NEWS_TITLE_CHARS]
            picture = attachment.url if attachment.kind == "image" else ""
            msgid = await self.api.send_news(member, title, attachment.url, picture)
        elif attachment is None and part.text.strip():
            msgid = await self.api.send_text(member, part.text)
        else:
            raise Unsupported(PLATFORM, "a part with neither text nor one file cannot be sent")
        log.info("wecom app sent account=%s chat=%s part=%d file=%s", self.account, member, part.index,
                 attachment is not None)
        return SentMessage(message=MessageId(msgid or idempotency_key))

    async def _send_file(self, member: str, attachment: Attachment) -> str:
        """Upload the file and send it: a JPG or PNG image as an image message (the two WeCom shows),
        anything else as a file message."""
        path = Path(attachment.path or "")
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as error:
            raise BadRequest(PLATFORM, f"the attachment cannot be read ({error.strerror})") from None
        name = attachment.name or path.name
        mime = attachment.mime_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
        msgtype = "image" if attachment.kind == "image" and mime in IMAGE_TYPES else "file"
        media_id = await self.api.upload(msgtype, name, data, mime)
        return await self.api.send_media(member, msgtype, media_id)

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
