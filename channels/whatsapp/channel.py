"""WhatsappChannel: a business number on the WhatsApp Cloud API, reached by signed webhook (ADR 0049).

Inbound, Meta POSTs each body to ``/webhooks/whatsapp/<account>``.  It is
checked before it is read: ``X-Hub-Signature-256``, the app secret's HMAC of the
raw body (the kit's ``META_HUB``); a forged or unsigned body is 401 and nothing
is stored.  The learners' messages in it (decode.py) are made durable on the
kit's ack clock and only then answered 200; Meta's redeliveries of a ``wamid``
land on one dedup key.  The status callbacks in the same bodies (sent,
delivered, read, failed) move each sent message's delivery state forward in
the account's cursors -- never back, as Meta's statuses arrive out of order --
and the store prunes each once Meta would no longer resend it.
The GET Meta sends when the teacher saves the callback URL is answered with its
``hub.challenge`` once ``hub.verify_token`` matches.

Outbound, replies are free-form text (4,096 characters, WhatsApp's own
``*bold*`` markup) inside the learner's 24-hour customer-service window, which
the one outbound path enforces from the learner's last message in the store.
A message the learner did not ask for (a reminder) goes free-form while the
window is open -- the channel keeps when each learner last wrote -- and
outside it as the partner's approved ``reminder`` template, or not at all:
``ReplyWindowClosed``, which the outbound path records and tells the teacher.
While the model works, :meth:`typing` marks the learner's last message read
and shows the typing bubble.  Files come in by two-step download after the
ack (:meth:`fetch_media`) and go out uploaded first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, ClassVar

from channels._kit.ack import AckClock
from channels._kit.challenges import challenge_response, meta_challenge
from channels._kit.media import read_attachment
from channels._kit.signatures import META_HUB, verify_hmac
from channels.base import Channel, ChannelContext
from channels.whatsapp.config import WhatsappConfig
from channels.whatsapp.decode import CHANNEL, Message, Skipped, Status, decode, items, read_body, values
from channels.whatsapp.transport import PLATFORM, GraphApi
from gateway.core.capabilities import ChannelCapabilities, Proactive
from gateway.core.channel import ChannelState, Heartbeat, MediaStream
from gateway.core.errors import AuthFailed, GatewayError, InvalidEvent, PeerUnreachable, PlatformError, ReplyWindowClosed
from gateway.core.messages import (
    Address,
    ChatId,
    Conversation,
    ConversationKind,
    InboundMessage,
    MediaRef,
    MessageId,
    Referrer,
    RenderedPart,
    SentMessage,
)
from gateway.core.probes import ProbeResult, Problem
from gateway.endpoints import origin

if TYPE_CHECKING:  # pragma: no cover
    from starlette.requests import Request
    from starlette.responses import Response

log = logging.getLogger(__name__)
ALIVE_S = 30.0
CONSOLE = "developers.facebook.com → your app → WhatsApp → API Setup"
STATES = {"sent": 1, "delivered": 2, "read": 3, "failed": 4}
"""A sent message's delivery states in the order they can follow each other; ``failed`` is final."""
KINDS = {"image": "image", "audio": "audio", "video": "video", "file": "document"}


class WhatsappChannel(Channel[WhatsappConfig]):
    name: ClassVar[str] = "whatsapp"
    config_model = WhatsappConfig

    def __init__(self, context: ChannelContext[WhatsappConfig]) -> None:
        super().__init__(context)
        self.acks = AckClock(PLATFORM, self.account, self.declared.ack_deadline_s)
        self._last: dict[str, tuple[float, str]] = {}
        """wa_id -> when the learner last wrote and that message's wamid (the cursors keep it across restarts)."""
        self._api: GraphApi | None = None

    @classmethod
    def capabilities_for(cls, settings: WhatsappConfig) -> ChannelCapabilities:
        """With a reminder template, a reminder may be due outside the window: the template carries it."""
        caps = cls.capabilities()
        if any(t.reminder for t in settings.templates.values()):
            return caps.model_copy(update={"proactive": Proactive.TEMPLATE})
        return caps

    @classmethod
    def check(cls, settings: WhatsappConfig) -> list[Problem]:
        if not settings.graph_base.startswith(("http://", "https://")):
            return [Problem(message=f"graph_base {settings.graph_base!r} is not an http(s) address",
                            fix="remove graph_base to use Meta's own")]
        return []

    @property
    def api(self) -> GraphApi:
        if self._api is None:
            self._api = GraphApi(self.settings)
        return self._api

    async def probe(self) -> ProbeResult:
        """``GET /{phone-number-id}``: proves the token, its permission and the number id at once."""
        where = f"WhatsApp number {self.settings.phone_number_id} at {origin(self.settings.graph_base)}"
        api = GraphApi(self.settings)
        try:
            me = await api.me()
        except PeerUnreachable as error:
            return ProbeResult.failed(where, f"nothing answers at {error.endpoint} ({error.why})",
                                      "check the network and graph_base")
        except AuthFailed as error:
            return ProbeResult.failed(where, f"Meta refuses the access token ({error.code})",
                                      f"make a permanent system-user token with whatsapp_business_messaging ({CONSOLE})")
        except GatewayError as error:
            return ProbeResult.failed(where, f"Meta answered {getattr(error, 'code', '') or 'an error'}",
                                      f"copy the Phone number ID again from {CONSOLE}")
        finally:
            await api.close()
        return ProbeResult(checked=f"WhatsApp number {me.get('display_phone_number') or self.settings.phone_number_id}"
                                   f" at {origin(self.settings.graph_base)}")

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("whatsapp number ready account=%s phone_number_id=%s", self.account, self.settings.phone_number_id)
        while True:  # Meta posts to the webhook; this only shows the account is alive
            heartbeat.beat()
            await asyncio.sleep(ALIVE_S)

    async def verify_webhook(self, request: Request) -> Response:
        challenge = meta_challenge(request.query_params, self.settings.verify_token.get_secret_value())
        log.info("whatsapp callback URL verified account=%s", self.account)
        return challenge_response(challenge)

    async def handle_webhook(self, request: Request) -> Response:
        from starlette.responses import Response

        raw = await request.body()
        verify_hmac(request.headers, raw, self.settings.app_secret.get_secret_value(), META_HUB)
        try:
            body = read_body(raw)
        except InvalidEvent as error:
            self.context.sink.invalid(str(error))
            raise
        messages: list[InboundMessage] = []
        statuses: list[Status] = []
        for value in values(body, self.settings.phone_number_id):
            for status in items(Status, value.statuses):
                if isinstance(status, InvalidEvent):
                    self.context.sink.invalid(str(status))
                else:
                    statuses.append(status)
            for item in items(Message, value.messages):
                try:
                    if isinstance(item, InvalidEvent):
                        raise item
                    messages.append(decode(item, value.contacts, account=self.account))
                except Skipped as skipped:
                    self.context.sink.refused("whatsapp-type", str(skipped))
                except InvalidEvent as error:
                    self.context.sink.invalid(str(error))
        await self.acks.accept(self.context.sink, messages)
        for message in messages:
            log.info("whatsapp message stored account=%s chat=%s message=%s", self.account,
                     message.address.conversation.chat, message.event_id)
            await self._wrote(message)
        for status in statuses:
            await self._status(status)
        return Response(status_code=200)

    async def _wrote(self, message: InboundMessage) -> None:
        """Remember when the learner last wrote: it opens the window a reminder may go through free-form."""
        chat, at = str(message.address.conversation.chat), message.received_at.timestamp()
        if at >= self._last.get(chat, (0.0, ""))[0]:
            self._last[chat] = (at, str(message.event_id))
            await self.context.cursors.put(f"last:{chat}", f"{at} {message.event_id}",
                                           keep_s=self.declared.reply_window_s)  # past it, no record means closed

    async def _last_wrote(self, chat: str) -> tuple[float, str] | None:
        if chat not in self._last and (kept := await self.context.cursors.get(f"last:{chat}")):
            at, _, wamid = kept.partition(" ")
            self._last[chat] = (float(at), wamid)
        return self._last.get(chat)

    async def _status(self, status: Status) -> None:
        """Move a sent message's delivery state forward (statuses come out of order, and again)."""
        if status.status not in STATES:
            self.context.sink.refused("whatsapp-status", f"status {status.status[:20]} of {status.id[:40]}")
            return
        key = f"status:{status.id}"
        before = await self.delivery_state(status.id)
        if before is not None and STATES[before.split(" ")[0]] >= STATES[status.status]:
            return
        said = status.status
        if status.status == "failed":
            said += "".join(f" {e.code}" for e in status.errors)
        await self.context.cursors.put(key, said, keep_s=self.declared.redelivery_horizon_s)  # Meta stops resending then
        if status.status == "failed" and status.recipient_id:  # recorded first: a redelivered status reports nothing
            why = "; ".join(f"{e.code} {e.title}".strip() for e in status.errors) or "no reason given"
            learner = Address(channel=CHANNEL, account=self.account, conversation=Conversation(
                chat=ChatId(status.recipient_id), kind=ConversationKind.DIRECT))
            await self.context.sink.undelivered(learner, f"WhatsApp {why}")

    async def delivery_state(self, wamid: str) -> str | None:
        """What Meta last said of a message we sent: ``sent``, ``delivered``, ``read``, ``failed <codes>``."""
        return await self.context.cursors.get(f"status:{wamid}")

    # ------------------------------------------------------------------ outbound

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        to = str(target.conversation.chat)
        if part.attachment is not None:
            file = await read_attachment(self.api.client, part.attachment, limit=self.media_limit(), platform=PLATFORM)
            media_id = await self.api.upload(file.data, file.name, file.content_type)
            sent = await self.api.send_media(to, KINDS[part.attachment.kind], media_id, name=file.name)
        elif referrer == Referrer() and not await self._window_open(to):
            sent = await self._template(to, part.plain or part.text)
        else:
            sent = await self.api.send_text(to, part.text)
        log.info("whatsapp sent account=%s chat=%s part=%d", self.account, to, part.index)
        return SentMessage(message=MessageId(sent or idempotency_key))

    async def _window_open(self, chat: str) -> bool:
        window = self.declared.reply_window_s
        last = await self._last_wrote(chat)
        return window is None or (last is not None and time.time() < last[0] + window)

    async def _template(self, to: str, text: str) -> str:
        """Outside the window: the partner's reminder template, or ``ReplyWindowClosed`` (the teacher is told)."""
        template = self.settings.templates_for(self.context.partner_name).reminder
        if template is None:
            raise ReplyWindowClosed(PLATFORM, "more than 24 hours since the learner last wrote, and "
                                    f"{self.context.partner_name or 'the partner'} has no reminder template")
        return await self.api.send_template(to, template, text)

    async def typing(self, target: Address) -> None:
        """The learner's last message marked read, with the typing bubble (gone after 25 s or on the reply)."""
        last = await self._last_wrote(str(target.conversation.chat))
        if last is None:
            return
        try:
            await self.api.mark_read(last[1], typing=True)
        except PlatformError as error:  # a courtesy: a refused one costs the learner nothing
            log.info("whatsapp typing refused account=%s code=%s", self.account, error.code)

    @asynccontextmanager
    async def _fetch(self, ref: MediaRef, limit: int) -> AsyncIterator[MediaStream]:
        async with await self.api.media(ref.locator, limit=limit) as stream:
            yield stream

    def fetch_media(self, ref: MediaRef, *, limit: int) -> AbstractAsyncContextManager[MediaStream]:
        """Two steps, after the ack: the media id's short-lived URL, then its bytes with the token."""
        return self._fetch(ref, limit)

    async def close(self) -> None:
        if self._api is not None:
            api, self._api = self._api, None
            await api.close()
