"""MsteamsChannel: a Teams bot on the Bot Framework, by signed webhook and the Bot Connector (ADR 0050).

Inbound, Teams POSTs each activity to ``/webhooks/msteams/<account>``.  The
bearer JWT is checked first (auth.py: the Bot Framework's keys, issuer,
audience = the App ID, expiry, the serviceUrl it names); a refused request is
401 and nothing is stored.  A message is decoded (decode.py), its
conversation reference (serviceUrl, conversation id, locale) kept in the
account's cursor store when new -- a reminder has no activity to answer and
needs it -- and made durable on the kit's ack clock before the 200.  Teams'
redeliveries of one activity land on one dedup key.

Outbound, each part is one activity posted to the conversation's
``serviceUrl`` (transport.py), the reply to the learner's message where
there is one, else into the stored conversation (proactive).  Text is
Teams' Markdown; an image goes as an attachment by URL; nothing here needs an
Adaptive Card, so none is sent.  Personal chats stream (stream.py); group
chats and channels get the final answer alone (:meth:`stream_mode`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, ClassVar

import httpx

from channels._kit.ack import AckClock
from channels.base import Channel, ChannelContext
from channels.msteams.auth import InboundAuth, allowed
from channels.msteams.config import MsteamsConfig
from channels.msteams.decode import THREAD, ConversationRef, Skipped, decode, read
from channels.msteams.stream import Streams
from channels.msteams.transport import PLATFORM, TIMEOUT, ConnectorApi
from gateway.core.capabilities import EditMode
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import AuthFailed, BadRequest, GatewayError, InvalidEvent, NotFound, PeerUnreachable, Unsupported
from gateway.core.messages import (
    Address,
    ConversationKind,
    MessageId,
    Referrer,
    RenderedPart,
    SentMessage,
    StreamChunk,
    StreamHandle,
)
from gateway.core.phrases import Phrase, catalogued, say
from gateway.core.probes import ProbeResult, Problem
from gateway.endpoints import origin

if TYPE_CHECKING:  # pragma: no cover
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger(__name__)
ALIVE_S = 30.0
PORTAL = "portal.azure.com, your Azure Bot → Configuration"


class References:
    """Each conversation's reference, in the cursor store under ``ref:<conversation id>``, cached."""

    def __init__(self, context: ChannelContext[MsteamsConfig]) -> None:
        self.context = context
        self._known: dict[str, ConversationRef] = {}

    async def keep(self, ref: ConversationRef) -> None:
        if self._known.get(ref.conversation) != ref:
            await self.context.cursors.put("ref:" + ref.conversation, ref.model_dump_json())
            self._known[ref.conversation] = ref

    async def find(self, conversation: str) -> ConversationRef | None:
        if conversation not in self._known:
            stored = await self.context.cursors.get("ref:" + conversation)
            if stored is None:
                return None
            self._known[conversation] = ConversationRef.model_validate_json(stored)
        return self._known[conversation]


class MsteamsChannel(Channel[MsteamsConfig]):
    name: ClassVar[str] = "msteams"
    config_model = MsteamsConfig

    def __init__(self, context: ChannelContext[MsteamsConfig]) -> None:
        super().__init__(context)
        caps = self.declared
        self.http = httpx.AsyncClient(timeout=TIMEOUT, trust_env=False)
        self.auth = InboundAuth(self.settings, self.http, caps.signature_window_s)
        self.api = ConnectorApi(self.settings, self.http)
        self.streams = Streams(self.api)
        self.refs = References(context)
        self.acks = AckClock(PLATFORM, self.account, caps.ack_deadline_s)

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: MsteamsConfig) -> list[Problem]:
        bad = [url for url in (settings.openid_url, settings.token_endpoint, *settings.service_urls)
               if not url.startswith(("http://", "https://"))]
        return [Problem(message=f"{url!r} is not an http(s) address", fix="remove it to use Microsoft's own")
                for url in bad]

    async def probe(self) -> ProbeResult:
        """A token from Entra and the Bot Framework's key set: proves the App ID, the secret and the network."""
        where_ = f"Teams bot {self.settings.app_id} at {origin(self.settings.token_endpoint)}"
        api = ConnectorApi(self.settings)
        try:
            await api.token()
            held = await InboundAuth(self.settings, api.client, None).keys.load()
        except PeerUnreachable as error:
            return ProbeResult.failed(where_, f"nothing answers at {error.endpoint} ({error.why})",
                                      "check the network, token_url and openid_url")
        except AuthFailed:
            return ProbeResult.failed(where_, "Entra refuses the bot's App ID or client secret",
                                      f"copy the Microsoft App ID from {PORTAL}, and a new client secret's Value "
                                      "from its app registration → Certificates & secrets (and tenant_id for a "
                                      "single-tenant bot)")
        except GatewayError as error:
            return ProbeResult.failed(where_, f"Microsoft answered {getattr(error, 'code', '') or 'an error'}",
                                      "try again in a minute; if it lasts, check token_url and openid_url")
        finally:
            await api.close()
        return ProbeResult(checked=f"{where_}, {held} signing keys at {origin(self.settings.openid_url)}")

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("msteams bot ready account=%s app_id=%s", self.account, self.settings.app_id)
        while True:  # Teams posts to the webhook; this only shows the account is alive
            heartbeat.beat()
            await asyncio.sleep(ALIVE_S)

    async def handle_webhook(self, request: Request) -> Response:
        from starlette.responses import JSONResponse

        body = await request.body()
        try:
            activity = read(body)
        except InvalidEvent:
            await self.auth.check(request.headers, channel_id="", service_url=None)  # unsigned junk is 401, not 400
            raise
        await self.auth.check(request.headers, channel_id=activity.channel_id, service_url=activity.service_url)
        await self.refs.keep(ConversationRef(service_url=activity.service_url, conversation=activity.conversation.id,
                                             locale=activity.locale))  # the bot's install too: a later reminder
        try:
            message = decode(activity, account=self.account)
        except Skipped as skipped:
            self.context.sink.refused("msteams-activity", str(skipped))
            return JSONResponse({})
        except InvalidEvent as error:
            self.context.sink.invalid(str(error))
            raise
        await self.acks.accept(self.context.sink, [message])
        log.info("msteams activity stored account=%s message=%s", self.account, activity.id)
        return JSONResponse({})

    # ------------------------------------------------------------------ outbound

    async def _reach(self, target: Address, referrer: Referrer) -> tuple[str, str, str]:
        """The serviceUrl, conversation id and locale a message to ``target`` goes by."""
        chat, thread = target.conversation.chat, target.conversation.thread
        conversation = f"{chat}{THREAD}{thread}" if thread else chat
        ref = await self.refs.find(conversation)
        service = referrer.token or (ref.service_url if ref else "")
        if not service:
            raise NotFound(PLATFORM, f"no conversation reference for {conversation[:60]!r}: the bot may write "
                                     "there only once Teams has posted an activity from it")
        if not allowed(self.settings, service):
            raise BadRequest(PLATFORM, f"serviceUrl {service[:60]!r} is not in service_urls")
        return service, conversation, ref.locale if ref else ""

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        service, conversation, _ = await self._reach(target, referrer)
        activity: dict = {"type": "message"}
        if part.attachment is not None:
            if not part.attachment.url:
                raise Unsupported(PLATFORM, "this release sends files by URL only")
            activity["attachments"] = [{"contentType": part.attachment.mime_type or "image/png",
                                        "contentUrl": part.attachment.url, "name": part.attachment.name}]
        elif part.text.strip():
            activity |= {"text": part.text, "textFormat": "markdown"}
        else:
            raise Unsupported(PLATFORM, "a part with neither text nor a file cannot be sent")
        sent = await self.api.post(service, conversation, activity, reply_to=referrer.message)
        log.info("msteams sent account=%s chat=%s part=%d", self.account, target.conversation.chat, part.index)
        return SentMessage(message=MessageId(sent or idempotency_key))

    async def typing(self, target: Address) -> None:
        service, conversation, _ = await self._reach(target, Referrer())
        await self.api.post(service, conversation, {"type": "typing"})

    def stream_mode(self, target: Address) -> EditMode:
        """Teams streams in personal chats only (TM5); elsewhere the final answer is sent alone."""
        return EditMode.NATIVE_STREAM if target.conversation.kind is ConversationKind.DIRECT else EditMode.NONE

    async def start(self, target: Address, referrer: Referrer, key: str) -> StreamHandle:
        if self.stream_mode(target) is not EditMode.NATIVE_STREAM:
            raise Unsupported(PLATFORM, "Teams streams in personal chats only")
        service, conversation, locale = await self._reach(target, referrer)
        handle = await self.streams.open(service, conversation, say(Phrase.THINKING, catalogued(locale) or "en"))
        return StreamHandle(target=target, referrer=referrer, handle=handle)

    async def append(self, stream: StreamHandle, chunk: StreamChunk) -> None:
        service, conversation, _ = await self._reach(stream.target, stream.referrer)
        await self.streams.update(service, conversation, stream.handle, chunk.so_far.text)

    async def finish(self, stream: StreamHandle, final: RenderedPart) -> SentMessage:
        service, conversation, _ = await self._reach(stream.target, stream.referrer)
        return await self.streams.close(service, conversation, stream.handle, final.text)

    async def close(self) -> None:
        await self.http.aclose()
