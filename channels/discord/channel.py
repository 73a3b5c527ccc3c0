"""DiscordChannel: one bot on Discord's Gateway and REST API, through discord.py.

Inbound is the Gateway connection discord.py keeps: it identifies with the
account's intents, heartbeats, and after a dropped socket or an op 7 RECONNECT
resumes the session with its ``session_id`` and last sequence, and Discord
replays what was dispatched meanwhile.  The Gateway has no per-event
acknowledgement; an event counts as handled once ``await sink.accept(...)``
returned, and one that is replayed (or dispatched twice) carries the same
snowflake, so the gateway's dedup answers it once.  What a *new* session
cannot replay (said while we were down, or killed in flight) is fetched over
REST on its READY from the last accepted message of each known channel: see
channels/discord/catchup.py.  An event that could not be stored ends the run,
so the supervisor restarts the account and that catch-up fetches it again.
While discord.py
reconnects the account reports ``error`` with the reason, and ``running``
again once the session is back.

Slash commands (``/ask``, ``/stop``, ``/link``) arrive as interactions on the
same connection.  Each is made durable first, then deferred (Discord wants an
answer within 3 s; accepting takes milliseconds; an answer ready sooner waits for
the deferral, since the follow-up webhook exists only from then on), and answered by follow-up
through the interaction's webhook while its token lives (``reply_token_lifetime_s``, 15 min).  Past that,
or when Discord refuses the follow-up as a dead token (404 with code 10015 or 10062, ``ReplyWindowClosed``:
the deferral never reached Discord, or we restarted late), the answer goes to the channel as a plain
message, with the part's nonce: a refused follow-up posts nothing, so a retry shows one message.  With
``public_key`` set Discord may POST them to the HTTP interactions endpoint instead
(channels/discord/interactions.py); they take the same decode, webhook and fallback.

Outbound: a part is a message in the channel (or the thread) that replies to
the learner's message; a long answer to a channel message continues in a thread
(channels/discord/threads.py); streaming edits it in place, no faster than the
declared ``min_edit_interval``.  Sends carry a nonce Discord deduplicates.
Rate limits belong to the outbound path's pacer: see channels/discord/transport.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import ClassVar

import discord
import httpx
from cachetools import TTLCache
from discord import app_commands
from starlette.requests import Request
from starlette.responses import Response

from channels._kit.media import download
from channels._kit.positions import ChatPositions
from channels.base import Channel, ChannelContext
from channels.discord.catchup import CURSOR, missed
from channels.discord.config import DiscordConfig
from channels.discord.decode import InteractionPayload, decode_interaction, decode_message, interaction_token
from channels.discord.encode import nonce_for, outgoing
from channels.discord.interactions import InteractionsEndpoint
from channels.discord.probe import check_settings, intent_problems, probe_application
from channels.discord.threads import continuation
from channels.discord.transport import PLATFORM, call, new_client, translate
from gateway.core.channel import ChannelState, Heartbeat, MediaStream
from gateway.core.errors import AuthFailed, GatewayError, InvalidEvent, PeerUnavailable, ReplyWindowClosed, Unsupported
from gateway.core.messages import Address, InboundMessage, MediaRef, MessageId, Referrer, RenderedPart, SentMessage
from gateway.core.probes import Gravity, ProbeResult, Problem
from gateway.redaction import register_secret

log = logging.getLogger(__name__)
BEAT_S = 5.0
FOLLOWUPS_KEPT = 500


class DiscordChannel(Channel[DiscordConfig]):
    name: ClassVar[str] = "discord"
    config_model = DiscordConfig

    def __init__(self, context: ChannelContext[DiscordConfig]) -> None:
        super().__init__(context)
        register_secret(self.settings.token, "discord bot token")
        self._client: discord.Client | None = None
        self._login = asyncio.Lock()
        self._heartbeat: Heartbeat | None = None
        self._deferring: dict[str, asyncio.Event] = {}
        """Interaction token -> set once its deferral was answered: an answer ready sooner (``/stop``) waits for it."""
        self._followups: TTLCache[str, str] = TTLCache(FOLLOWUPS_KEPT, ttl=self.token_lifetime_s)
        """Message id -> the interaction token it was sent through, while it lives: a streaming edit goes the same way."""
        self._cursors = ChatPositions(None)
        self._failed: BaseException | None = None
        self._behind: dict[str, int] = {}
        """Cursors as they stood when the session was lost: live messages do not move these until caught up."""
        self._in_order = asyncio.Lock()
        """One message stored at a time, in dispatch order, so a cursor never passes one still being stored."""
        self._endpoint = InteractionsEndpoint(self.settings.public_key, self.account) if self.settings.public_key else None

    @property
    def token_lifetime_s(self) -> float:
        """How long an interaction token answers follow-ups (platforms.toml; 15 min)."""
        return self.capabilities().reply_token_lifetime_s or 0.0

    @property
    def me(self) -> str:
        assert self._client is not None and self._client.user is not None
        return str(self._client.user.id)

    async def _ready(self) -> discord.Client:
        """The logged-in client (REST only until ``run`` connects); sends may come before ``run``."""
        async with self._login:
            if self._client is None:
                client = new_client(self.settings)
                try:
                    await call("login", client.login(self.settings.token.get_secret_value()), endpoint=self.settings.api_base)
                except BaseException:
                    await client.close()
                    raise
                self._client = client
                log.info("discord logged in account=%s bot=%s", self.account, client.user)
            return self._client

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: DiscordConfig) -> list[Problem]:
        return check_settings(settings)

    async def probe(self) -> ProbeResult:
        problems = self.check(self.settings)
        if problems:
            return ProbeResult(checked="the Discord bot token", problems=tuple(problems))
        return await probe_application(self.settings)

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        """Connect and stay connected; a run that ends leaves a fresh client (and session) to the next."""
        client = await self._ready()
        self._heartbeat = heartbeat
        self._failed = None
        self._cursors = ChatPositions(await self.context.cursors.get(CURSOR))
        self._behind = dict(self._cursors.last)
        heartbeat.set_state(ChannelState.CONNECTING)
        app = client.application
        refused = [p for p in intent_problems(self.settings, app.flags) if p.gravity is Gravity.ERROR] if app else []
        if refused:  # found before connecting: the Gateway would refuse the intents (4014) on every reconnect
            raise AuthFailed(PLATFORM, f"{refused[0].message}; {refused[0].fix}", code=4014)
        self._listen(client, heartbeat)
        if self.settings.slash_commands:
            await self._register_commands(client)
        beating = asyncio.create_task(self._beat(client, heartbeat))
        try:
            await call("gateway", client.connect(reconnect=True), endpoint=self.settings.gateway_url)
            if self._failed is not None:
                raise PeerUnavailable(PLATFORM, f"an event could not be stored ({self._failed}); restarting to fetch it again")
            raise PeerUnavailable(PLATFORM, "the Gateway connection ended")
        finally:
            beating.cancel()
            await self.close()

    def _listen(self, client: discord.Client, heartbeat: Heartbeat) -> None:
        async def on_ready() -> None:
            heartbeat.set_state(ChannelState.RUNNING)
            log.info("discord connected account=%s bot=%s guilds=%d", self.account, client.user, len(client.guilds))
            await self._catch_up(client, heartbeat)

        async def on_resumed() -> None:
            heartbeat.set_state(ChannelState.RUNNING)
            log.info("discord session resumed account=%s", self.account)
            self._behind = {}  # the Gateway replayed what the session missed

        async def on_connect() -> None:  # before READY or RESUMED: live messages must not pass what a catch-up needs
            self._behind = self._behind or dict(self._cursors.last)

        async def on_disconnect() -> None:
            heartbeat.set_state(ChannelState.ERROR, "the Discord Gateway connection dropped; reconnecting to resume the session")

        async def on_message(message: discord.Message) -> None:
            await self._message(message, heartbeat)

        for handler in (on_connect, on_ready, on_resumed, on_disconnect, on_message):
            setattr(client, handler.__name__, handler)  # discord.py's documented Client.event, by attribute

    async def _message(self, message: discord.Message, heartbeat: Heartbeat, *, caught_up: bool = False) -> bool:
        """Decode, store and move the channel's cursor past one message; False when it could not be stored."""
        inbound: InboundMessage | None
        try:
            inbound = decode_message(message, account=self.account, me=self.me)
        except (InvalidEvent, ValueError, AttributeError) as error:
            self.context.sink.invalid(f"discord message {message.id}: {error}")
            inbound = None
        async with self._in_order:
            if inbound is not None and not await self._accept(inbound, heartbeat):
                return False
            where = str(message.channel.id)
            if not (caught_up or where not in self._behind) or self._failed is not None:
                return True
            if self._cursors.advance(where, message.id):
                await self.context.cursors.put(CURSOR, self._cursors.dump())
        return True

    async def _catch_up(self, client: discord.Client, heartbeat: Heartbeat) -> None:
        """Every known channel from its cursor, oldest first; a channel that is gone (404/403) is forgotten."""
        fetched = 0
        for channel, after in list(self._behind.items()):
            try:
                async for message in missed(client, channel, after, self.settings):
                    fetched += 1
                    if not await self._message(message, heartbeat, caught_up=True):
                        return
                self._behind.pop(channel, None)
            except (discord.NotFound, discord.Forbidden) as error:
                log.warning("discord channel no longer readable account=%s channel=%s: %s", self.account, channel, error)
                self._cursors.forget(channel)
                self._behind.pop(channel, None)
            except Exception as error:  # a 429, a 5xx, a dropped socket: the next new session fetches it again
                self._fail(client, translate(error, "catch up"))
                return
        log.info("discord caught up account=%s channels=%d messages=%d", self.account, len(self._cursors.last), fetched)

    async def _accept(self, inbound: InboundMessage, heartbeat: Heartbeat | None) -> bool:
        """Hand one event to the sink; on failure end the run, so a new session's catch-up fetches it again."""
        try:
            await self.context.sink.accept([inbound])
        except Exception as error:
            log.exception("discord event not stored account=%s event=%s", self.account, inbound.event_id)
            if self._client is not None:
                self._fail(self._client, error)
            return False
        if heartbeat is not None:
            heartbeat.event()
        return True

    def _fail(self, client: discord.Client, error: BaseException) -> None:
        if self._failed is None:
            self._failed = error
            asyncio.get_running_loop().create_task(client.close())  # connect() returns; run() raises with the reason

    async def _beat(self, client: discord.Client, heartbeat: Heartbeat) -> None:
        """Beat while discord.py's connection lives: its own heartbeat/ACK watch catches a silent socket."""
        while True:
            await asyncio.sleep(BEAT_S)
            if not client.is_closed():
                heartbeat.beat()

    async def _register_commands(self, client: discord.Client) -> None:
        tree = app_commands.CommandTree(client)
        channel = self

        @tree.command(name="ask", description="Ask your partner a question")
        @app_commands.describe(question="what you want to ask")
        async def ask(interaction: discord.Interaction, question: str) -> None:  # the options are read off the payload
            await channel._command(interaction)

        @tree.command(name="stop", description="Stop the answer being written")
        async def stop(interaction: discord.Interaction) -> None:
            await channel._command(interaction)

        @tree.command(name="link", description="Link this chat to your learner profile with a code")
        @app_commands.describe(code="the code your teacher or another chat gave you")
        async def link(interaction: discord.Interaction, code: str) -> None:
            await channel._command(interaction)

        del ask, stop, link
        try:
            await call("register commands", tree.sync(), endpoint=self.settings.api_base)
        except GatewayError as error:  # the bot still works by messages; say why the commands are missing
            log.warning("discord slash commands not registered account=%s reason=%s", self.account, error)

    async def _command(self, interaction: discord.Interaction) -> None:
        try:
            inbound = decode_interaction(InteractionPayload.of(interaction), account=self.account,
                                         token_lifetime_s=self.token_lifetime_s)
        except (InvalidEvent, ValueError) as error:
            self.context.sink.invalid(f"discord interaction {interaction.id}: {error}")
            return
        deferred = self._deferring[interaction.token] = asyncio.Event()
        try:
            if not await self._accept(inbound, self._heartbeat):
                return  # not deferred: Discord shows the learner that the command failed
            late = self.capabilities().ack_deadline_s  # past Discord's 3 s the token is dead anyway: do not hold the answer
            await call("defer", asyncio.wait_for(interaction.response.defer(thinking=True), late))
        except GatewayError as error:  # stored: the answer comes as a channel message instead of a follow-up
            log.warning("discord interaction not deferred account=%s interaction=%s reason=%s",
                        self.account, interaction.id, error)
        finally:
            deferred.set()
            self._deferring.pop(interaction.token, None)

    async def handle_webhook(self, request: Request) -> Response:
        """The HTTP interactions endpoint, when the account has a ``public_key`` (channels/discord/interactions.py)."""
        if self._endpoint is None:
            raise Unsupported(PLATFORM, "this account has no public_key: its interactions come on the Gateway")
        answer = await self._endpoint.answer(request, self.context.sink, token_lifetime_s=self.token_lifetime_s)
        if self._heartbeat is not None:
            self._heartbeat.event()
        return answer

    @asynccontextmanager
    async def fetch_media(self, ref: MediaRef, *, limit: int) -> AsyncIterator[MediaStream]:
        """An attachment by the CDN URL its message carries, after the ack: the URL is signed by Discord
        (``ex``/``is``/``hm``), so no token goes with it; the kit streams it and stops at the limit.  A client
        of its own per file: files are few, and a run that ends (closing the bot's client) leaves it be."""
        async with httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0), trust_env=False) as http, download(
                http, ref.locator, limit=limit, platform=PLATFORM, declared_type=ref.mime_type, name=ref.name) as stream:
            yield stream

    # ------------------------------------------------------------------ outbound

    def _where(self, target: Address) -> int:
        return int(target.conversation.thread or target.conversation.chat)

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        client = await self._ready()
        token = interaction_token(referrer, datetime.now(UTC))
        if token is not None:
            if (deferring := self._deferring.get(token)) is not None:
                await deferring.wait()  # the follow-up webhook exists only once Discord took the deferral
            try:
                sent = await call("followup", self._hook(client, token).send(wait=True, **outgoing(part).send_kwargs()))
                self._followups[str(sent.id)] = token
                return SentMessage(message=MessageId(str(sent.id)))
            except ReplyWindowClosed as error:  # Discord posted nothing: the channel message below is the only one
                log.warning("discord follow-up refused, answering in the channel account=%s reason=%s", self.account, error)
        thread = await continuation(client, target, part, referrer, self.settings.long_answer_thread)
        where = client.get_partial_messageable(thread or self._where(target))
        reference = None
        if part.index == 0 and referrer.message:
            reference = discord.MessageReference(message_id=int(referrer.message), channel_id=where.id, fail_if_not_exists=False)
        message = await call("send", where.send(reference=reference, nonce=nonce_for(idempotency_key),  # type: ignore[arg-type]
                                                **outgoing(part).send_kwargs()))
        return SentMessage(message=MessageId(str(message.id)))

    @staticmethod
    def _hook(client: discord.Client, token: str) -> discord.Webhook:
        """The interaction's follow-up webhook (the application's id, the interaction's token)."""
        app_id = client.application_id or (client.user.id if client.user else 0)
        return discord.Webhook.partial(app_id, token, client=client)

    async def edit(self, target: Address, handle: str, part: RenderedPart, *, referrer: Referrer) -> None:
        message = MessageId(handle)  # the message id is the handle
        client = await self._ready()
        token = self._followups.get(message)
        if token is not None:
            try:
                await call("edit followup", self._hook(client, token).edit_message(int(message), content=part.text))
                return
            except ReplyWindowClosed:  # the token died: the bot still may edit its own message in the channel
                self._followups.pop(message, None)
        partial = client.get_partial_messageable(self._where(target)).get_partial_message(int(message))
        await call("edit", partial.edit(content=part.text))

    async def typing(self, target: Address) -> None:
        client = await self._ready()
        await call("typing", client.get_partial_messageable(self._where(target)).typing().wrapped_typer())

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()


