"""SlackChannel: one Slack app in one workspace, by Socket Mode (default) or the Events API.

Inbound, both modes hand each event to the same slack-bolt ``AsyncApp``, built
with ``process_before_response``: Bolt acknowledges (the Socket Mode envelope,
or the HTTP 200) only after the listener returned, and the listener returns
only after the event is accepted -- so the ack means durable.  The kit's ack
clock times that accept against Slack's 3 s, and one that took longer shows on
``/metrics`` as ``partners_late_acks_total``: Slack is about to retry.  A listener
that fails (the store cannot write) makes Bolt answer 500 / leave the envelope
unacked, and Slack delivers it again.  Redeliveries and Slack's retries
(``X-Slack-Retry-Num``) land on the same dedup key (see decode.py) and are
answered once.  Events API requests are checked with the kit's v0 HMAC
(five-minute window, constant-time) before anything is read.

Socket Mode's reconnect is the supervisor's: the SDK's socket client runs
with its own reconnect loop off, follows Slack's ``disconnect`` hand-overs, and
``run`` fails when the socket stays down, so one layer decides when to dial
again and the account's state says why.

Outbound, a streamed answer is a native stream (``start``/``append``/``finish``:
chat.startStream, appendStream, stopStream) where the workspace has it and the
answer has a thread to stream into (:meth:`SlackChannel.stream_mode`); else a
posted message edited with chat.update, at most once per ``min_edit_interval``
(platforms.toml).  A stream's handle is its message ts, so a restarted process
finishes the stream the killed one opened.  Slack takes no idempotency key, so a
send whose answer was lost may show twice (ADR 0022 bounds it to one per account).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, ClassVar

import httpx
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from channels._kit.ack import AckClock
from channels._kit.media import download
from channels._kit.signatures import SLACK_V0, verify_hmac
from channels.base import Channel, ChannelContext
from channels.slack.config import SlackConfig
from channels.slack.decode import Me, Skipped, decode
from channels.slack.encode import Calls, Where, fallback_text, image_blocks, linked_files
from channels.slack.locales import SlackLocales
from channels.slack.probe import check_settings, probe_app
from channels.slack.transport import PLATFORM, call, close_client, new_client
from gateway.core.capabilities import EditMode, capabilities_of
from gateway.core.channel import ChannelState, Heartbeat, MediaStream
from gateway.core.errors import InvalidEvent, PeerUnavailable, PermanentError, Unsupported
from gateway.core.messages import (
    Address,
    ConversationKind,
    InboundMessage,
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
READ_EVENTS = frozenset({"message", "app_mention"})
ALIVE_CHECK_S = 1.0
EVENTS_MODE_CHECK_S = 30.0
UPLOAD_LIMIT = capabilities_of(PLATFORM).media_max_bytes
SIGNATURE_WINDOW_S = capabilities_of(PLATFORM).signature_window_s
DOWNLOAD_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
"""Per read and per connect; the pipeline bounds the whole fetch (``media_fetch_timeout_s``)."""
"""Five minutes (platforms.toml).  No replay memory on top: a replay inside the window is a redelivery,
which the dedup key answers once, and Slack's own immediate retry may carry the very same signature."""


class SlackChannel(Channel[SlackConfig]):
    name: ClassVar[str] = "slack"
    config_model = SlackConfig

    def __init__(self, context: ChannelContext[SlackConfig]) -> None:
        super().__init__(context)
        self._client: AsyncWebClient | None = None
        self._me: Me | None = None
        self._app: AsyncApp | None = None
        self._socket: AsyncSocketModeHandler | None = None
        self._heartbeat: Heartbeat | None = None
        self._native = self.settings.streaming
        """Whether previews in threads are native streams; off for good once the workspace says it has none."""
        self._ready_lock = asyncio.Lock()
        self._http: httpx.AsyncClient | None = None
        """File downloads (``fetch_media``), streamed by the kit."""
        self.acks = AckClock.of(PLATFORM, self.account)
        """Times each event's accept against Slack's 3 s: both modes' acks wait for it."""
        self.locales = SlackLocales(self.settings, self.account)
        """Each learner's language (users.info), asked before the accept and bounded well inside the 3 s."""

    @property
    def calls(self) -> Calls:
        if self._client is None:
            self._client = new_client(self.settings)
        return Calls(self._client, self.settings.api_base)

    async def _ready(self) -> Me:
        """Who the bot is (auth.test; a wrong token fails here as AuthFailed)."""
        async with self._ready_lock:
            if self._me is None:
                client = self.calls.client
                said = await call("auth.test", client.auth_test(), self.settings.api_base)
                self._me = Me(user=str(said["user_id"]), bot=str(said.get("bot_id") or ""), team=str(said["team_id"]))
        return self._me

    def _bolt(self) -> AsyncApp:
        """The Bolt app both modes dispatch through; it acks after the listener returned."""
        if self._app is None:
            self._app = AsyncApp(client=self.calls.client, process_before_response=True, signing_secret="",
                                 request_verification_enabled=False, ignoring_self_events_enabled=False,
                                 ignoring_self_assistant_message_events_enabled=False, logger=log)
            self._app.event(re.compile(".*"))(self._on_event)
        return self._app

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: SlackConfig) -> list[Problem]:
        return check_settings(settings)

    async def probe(self) -> ProbeResult:
        client = new_client(self.settings)  # its own: a running account's stays as it is
        try:
            return await probe_app(client, self.settings)
        finally:
            await close_client(client)

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        me = await self._ready()
        self._heartbeat = heartbeat
        if self.settings.mode == "events":
            heartbeat.set_state(ChannelState.RUNNING)
            log.info("slack events api ready account=%s team=%s bot=%s", self.account, me.team, me.user)
            while True:  # Slack posts to the webhook; we only show the account is alive
                heartbeat.beat()
                await asyncio.sleep(EVENTS_MODE_CHECK_S)
        assert self.settings.app_token is not None, "SlackConfig refuses socket mode without app_token"
        self._socket = socket = AsyncSocketModeHandler(self._bolt(), self.settings.app_token.get_secret_value())
        try:
            await self._connected(socket.client, heartbeat, me)
        finally:  # a failed run's socket goes with it: the supervisor's next run dials a new one
            await self._close_socket()

    async def _connected(self, sdk: Any, heartbeat: Heartbeat, me: Me) -> None:
        sdk.auto_reconnect_enabled = sdk.default_auto_reconnect_enabled = False  # the supervisor reconnects
        sdk.wss_uri = await call("apps.connections.open", sdk.issue_new_wss_url(), self.settings.api_base)
        await sdk.connect()
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("slack socket mode connected account=%s team=%s bot=%s", self.account, me.team, me.user)
        down_since: float | None = None
        while True:
            await asyncio.sleep(ALIVE_CHECK_S)
            if await sdk.is_connected():
                down_since = None
                heartbeat.beat()
            elif down_since is None:
                down_since = time.monotonic()  # a disconnect hand-over takes a moment
            elif time.monotonic() - down_since > self.settings.socket_grace_s:
                raise PeerUnavailable(PLATFORM, f"the Socket Mode connection is down for over {self.settings.socket_grace_s:g} s")

    async def _on_event(self, body: dict[str, Any]) -> None:
        """Bolt's listener for every event: decode, make durable; returning is what lets Bolt ack."""
        found = body.get("event")
        event: dict[str, Any] = found if isinstance(found, dict) else {}
        kind = str(event.get("type"))
        if kind == "assistant_thread_started":
            await self._thread_started(event)
        elif kind in READ_EVENTS:
            try:
                message = decode(event, account=self.account, me=await self._ready())
            except Skipped as skipped:
                self.context.sink.refused("slack-subtype", f"{event.get('channel')}:{event.get('ts')}: {skipped}")
            except InvalidEvent as error:
                self.context.sink.invalid(str(error))
            else:
                await self.acks.accept(self.context.sink, [await self._with_locale(message)])
        else:
            self.context.sink.refused("slack-event", f"event {kind[:40]} is not read by the gateway")
        if self._heartbeat is not None:
            self._heartbeat.event()

    async def _with_locale(self, message: InboundMessage) -> InboundMessage:
        """The message with its sender's Slack locale, when Slack says it in time (see locales.py)."""
        sender = message.sender
        if sender.is_bot or message.from_self:
            return message
        locale = await self.locales.of(self.calls.client, sender.user)
        return message.model_copy(update={"sender": sender.model_copy(update={"locale": locale})}) if locale else message

    async def _thread_started(self, event: dict[str, Any]) -> None:
        thread = event.get("assistant_thread") or {}
        channel, ts = thread.get("channel_id"), thread.get("thread_ts")
        if self.settings.suggested_prompts and isinstance(channel, str) and isinstance(ts, str):
            try:
                await self.calls.prompts(channel, ts, self.settings.suggested_prompts)
            except PermanentError as error:  # decoration: the thread works without them
                log.info("slack suggested prompts not set account=%s reason=%s", self.account, error)

    async def handle_webhook(self, request: Request) -> Response:
        from starlette.responses import Response

        secret = self.settings.signing_secret
        if self.settings.mode != "events" or secret is None:
            raise Unsupported(PLATFORM, "this account uses Socket Mode; it has no webhook")
        body = await request.body()
        verify_hmac(request.headers, body, secret.get_secret_value(), SLACK_V0, window_s=SIGNATURE_WINDOW_S)
        await self._ready()
        answer = await self._bolt().async_dispatch(AsyncBoltRequest(body=body.decode("utf-8", "replace"),
                                                                    headers=dict(request.headers)))
        retry = request.headers.get("x-slack-retry-num")
        if retry:
            log.info("slack retry answered account=%s retry=%s status=%d", self.account, retry[:3], answer.status)
        return Response(answer.body, status_code=answer.status, media_type="application/json")

    def media_limit(self) -> int:
        return self.settings.max_download_bytes

    @asynccontextmanager
    async def fetch_media(self, ref: MediaRef, *, limit: int) -> AsyncIterator[MediaStream]:
        """A file by the ``url_private`` a decoded message carries, after the ack: Slack serves it only
        with the bot token as a Bearer, streamed and stopped at the limit by the kit."""
        await self._ready()
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT, trust_env=False)
        headers = {"Authorization": f"Bearer {self.calls.client.token}"}
        async with download(self._http, ref.locator, limit=limit, platform=PLATFORM, headers=headers,
                            declared_type=ref.mime_type, name=ref.name) as stream:
            yield stream

    # ------------------------------------------------------------------ outbound

    def _where(self, target: Address, referrer: Referrer | None = None) -> Where:
        team, _, user = ((referrer.token if referrer else None) or "").partition(":")
        return Where(target.conversation.chat, target.conversation.thread, team or None, user or None)

    def stream_mode(self, target: Address) -> EditMode:
        """A native stream into a thread while the workspace has them; a DM's top level, or a workspace
        without streams, gets a posted message edited in place (chat.update)."""
        return EditMode.NATIVE_STREAM if self._native and target.conversation.thread else EditMode.EDIT

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        await self._ready()
        where, calls = self._where(target, referrer), self.calls
        text = linked_files(part.text, part.attachments)
        first: str | None = None
        blocks = image_blocks(text, part.attachments)
        if text.strip() or blocks:
            first = await calls.post(where, fallback_text(part) if blocks else text, blocks)
        for attachment in part.attachments:
            if attachment.path:
                file = await calls.upload(where, attachment, UPLOAD_LIMIT)
                first = first or file
        if first is None:
            raise Unsupported(PLATFORM, "a part with neither text nor attachments cannot be sent")
        log.info("slack sent account=%s chat=%s message=%s part=%d", self.account, where.channel, first, part.index)
        return SentMessage(message=MessageId(first))

    async def edit(self, target: Address, handle: str, part: RenderedPart, *, referrer: Referrer) -> None:
        await self.calls.update(target.conversation.chat, MessageId(handle), part.text)

    async def start(self, target: Address, referrer: Referrer, key: str) -> StreamHandle:
        """chat.startStream in the thread; its handle is the stream message's ts (the channel is the target's),
        all a restarted process needs to append to it or finish it."""
        await self._ready()
        try:
            ts = await self.calls.start_stream(self._where(target, referrer), "")
        except Unsupported as error:
            self._native = False  # stream_mode now says edit: the pipeline shows this preview that way
            log.info("slack native streams unavailable, previews are edits account=%s reason=%s", self.account, error)
            raise
        return StreamHandle(target=target, referrer=referrer, handle=ts)

    async def append(self, stream: StreamHandle, chunk: StreamChunk) -> None:
        """Slack streams take Markdown and append it: the delta, as written (the final edit shows mrkdwn)."""
        if chunk.delta:
            await self.calls.append_stream(stream.target.conversation.chat, MessageId(stream.handle), chunk.delta)

    async def finish(self, stream: StreamHandle, final: RenderedPart) -> SentMessage:
        """Stop the stream, then make it show the final text.  A retried finish finds the stream already
        stopped (Slack says so, and that is fine): it still sets the final text."""
        channel, ts = stream.target.conversation.chat, MessageId(stream.handle)
        try:
            await self.calls.stop_stream(channel, ts)
        except PermanentError as error:
            log.debug("slack stream already stopped account=%s message=%s said=%s", self.account, ts, error)
        await self.calls.update(channel, ts, final.text)
        return SentMessage(message=ts)

    async def typing(self, target: Address) -> None:
        """Assistant threads show a status while the partner works; other conversations have no indicator."""
        conversation = target.conversation
        if conversation.kind is ConversationKind.DIRECT and conversation.thread:
            await self.calls.status(conversation.chat, conversation.thread, self.settings.thinking_status)

    async def _close_socket(self) -> None:
        if self._socket is not None:
            socket, self._socket = self._socket, None
            try:
                await socket.close_async()
            except Exception as error:  # closing must not raise over the supervisor's own shutdown
                log.debug("slack socket close account=%s error=%s", self.account, error)

    async def close(self) -> None:
        await self._close_socket()
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()
        if self._client is not None:
            client, self._client = self._client, None
            await close_client(client)
