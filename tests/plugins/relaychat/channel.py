"""RelayChannel: the gateway's channel for the relay platform emulator.

A third-party channel in every respect: it lives outside the gateway's
packages, is found through the ``partners.channels`` entry point and declares
its own capabilities (the relay platform has no row in ``platforms.toml``).

Inbound is a Telegram-style long poll on the kit's loop (``channels._kit.longpoll``).  The offset is advanced -- which
confirms the updates to the platform -- only after ``sink.accept`` returned,
so an update is never confirmed before it is durable; a crash in between
makes the platform hand the same updates out again, and the gateway's dedup
answers them once.  Outbound passes the part's idempotency key as
``client_msg_id``, which the platform uses to collapse repeated sends (a retry
after a lost response, a resumed reply).
"""

from __future__ import annotations

import logging
from typing import ClassVar

import httpx

from channels._kit.longpoll import Batch, poll
from channels.base import Channel, ChannelContext
from gateway.core.capabilities import ChannelCapabilities, Dialect, EditMode, InboundMode, SendRate, TextUnit
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.config import AccountConfig, EnvSecret
from gateway.core.errors import AuthFailed, BadRequest, GatewayError, InvalidEvent
from gateway.core.messages import Address, MessageId, Referrer, RenderedPart, SentMessage
from gateway.core.probes import ProbeResult
from relaychat.decode import decode
from relaychat.transport import call, new_client

log = logging.getLogger(__name__)

CAPABILITIES = ChannelCapabilities(
    platform="relay",
    text_limit=500,
    text_unit=TextUnit.CHARS,
    dialect=Dialect.PLAIN,
    elements=frozenset({"text", "mention", "quote"}),
    edit_mode=EditMode.EDIT,
    min_edit_interval=0.2,
    send_rate_chat=SendRate(rate=10, per=1, burst=5),
    send_rate_global=SendRate(rate=200, per=1, burst=50),
    inbound_modes=(InboundMode.POLL,),
    redelivery_horizon_s=86400,
    group_addressing="mention",
)


class RelayConfig(AccountConfig):
    base_url: str
    token: EnvSecret
    poll_timeout: float = 25.0
    """Seconds one getUpdates may wait on the platform (the supervisor's stall limit is 90)."""


class RelayChannel(Channel[RelayConfig]):
    name: ClassVar[str] = "relay"
    config_model = RelayConfig

    def __init__(self, context: ChannelContext[RelayConfig]) -> None:
        super().__init__(context)
        self._client: httpx.AsyncClient | None = None
        self._me: str | None = None

    @classmethod
    def capabilities(cls) -> ChannelCapabilities:
        return CAPABILITIES

    async def _call(self, method: str, body: dict, *, timeout: float = 15.0):
        if self._client is None:
            self._client = new_client()
        return await call(self._client, self.settings.base_url, self.settings.token.get_secret_value(), method, body, timeout=timeout)

    # ------------------------------------------------------------------ doctor

    async def probe(self) -> ProbeResult:
        """getMe with the account's token: a plugin channel brings its own probe, as every channel does."""
        where = self.settings.base_url
        try:
            me = await self._call("getMe", {})
        except AuthFailed:
            return ProbeResult.failed(where, f"the relay platform at {where} refused the token",
                                      "copy the bot's token again from the relay platform")
        except GatewayError as error:
            return ProbeResult.failed(where, f"the relay platform at {where} did not answer: {error}", "check base_url")
        return ProbeResult(checked=f"bot {me['id']} at {where}")

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        me = await self._call("getMe", {})  # a wrong token fails here, as AuthFailed
        self._me = str(me["id"])
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("relay polling account=%s bot=%s", self.account, self._me)
        await poll(self._fetch, sink=self.context.sink, cursors=self.context.cursors, heartbeat=heartbeat, what="relay getUpdates")

    async def _fetch(self, cursor: str | None) -> Batch:
        offset = int(cursor or 0)
        updates = await self._call("getUpdates", {"offset": offset, "timeout": self.settings.poll_timeout},
                                   timeout=self.settings.poll_timeout + 10)
        batch = []
        for update in updates:
            try:
                batch.append(decode(update, account=self.account, me=self._me or ""))
            except InvalidEvent as error:
                self.context.sink.invalid(str(error))
        moved = max((int(u.get("update_id", 0)) + 1 for u in updates), default=offset)
        return Batch(batch, str(moved) if moved > offset else None)

    # ------------------------------------------------------------------ outbound

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        body: dict = {
            "chat_id": target.conversation.chat,
            "text": part.text,
            # stable per part across retries and restarts (the outbound path makes it per part)
            "client_msg_id": idempotency_key,
        }
        if part.index == 0 and referrer.message is not None:
            body["reply_to"] = int(referrer.message)
        result = await self._call("sendMessage", body)
        log.info("relay sent account=%s chat=%s message=%s part=%d", self.account, target.conversation.chat,
                 result["message_id"], part.index)
        return SentMessage(message=MessageId(str(result["message_id"])))

    async def edit(self, target: Address, message: MessageId, part: RenderedPart, *, final: bool) -> None:
        body = {"chat_id": target.conversation.chat, "message_id": int(message), "text": part.text}
        try:
            await self._call("editMessageText", body)
        except BadRequest as error:
            if "not modified" not in error.detail:
                raise  # the same text again is a no-op, as on Telegram

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
