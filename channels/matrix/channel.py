"""MatrixChannel: a bot account on a Matrix homeserver, through matrix-nio.

Inbound is ``/sync`` long-polling from a stored sync token, on the kit's
long-poll loop (``channels._kit.longpoll``): the channel's part is one sync --
invites answered, events decoded -- and the loop stores the token only after
``sink.accept`` returned (durable), so a crash in between makes the next start
sync from the old token and see the same events again; the gateway's dedup (by
Matrix event id) answers each once.  A transient failure anywhere in one sync
(the sync itself, a join, a gap page) waits in place with the kit's backoff and
tries the same token again, so an invite whose join failed is listed again;
only a permanent error or retries run out end ``run`` for the supervisor.  nio
retries nothing itself (``transport``), so the kit's is the one layer.  A sync
whose room timeline was cut short (``limited``) has the gap paged in with
``/messages`` back to the old token, so a long outage drops nothing.  The very
first start has no token: its initial sync, before the loop, only takes one,
and history from before the gateway existed is not answered.

Outbound sends pass the idempotency key as the transaction id; the
homeserver returns the first event for a repeated ``(device, txnId)``, so a
retry after a lost response, or a resumed reply after a restart, shows one
message.  Streaming edits are ``m.replace`` events.

A room is *direct* when it has at most two members counting pending invites
(the bot and one learner), whatever the ``m.direct`` flag says: that flag is
the learner's own account data, which the bot cannot read, and a DM that a
third person joins must start obeying group mention rules.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import httpx
from nio import AsyncClient, MessageDirection

from channels._kit.longpoll import Batch, poll
from channels.base import Channel, ChannelContext, MediaStream
from channels.matrix.config import MatrixConfig
from channels.matrix.decode import RoomView, Skipped, Unreadable, decode, object_at, reply_target
from channels.matrix.encode import edit_content, media_content, text_content
from channels.matrix.media import fetch, upload
from channels.matrix.probe import check_settings, probe_homeserver
from channels.matrix.transport import call, new_client
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import AuthFailed, GatewayError, InvalidEvent, TransientError
from gateway.core.messages import (
    Address,
    ConversationKind,
    InboundMessage,
    MediaRef,
    MessageId,
    Referrer,
    RenderedPart,
    SentMessage,
)
from gateway.core.probes import ProbeResult, Problem
from gateway.redaction import register_secret

log = logging.getLogger(__name__)
CURSOR = "sync_token"
GAP_LIMIT = 5000
"""Most events paged in to fill one room's gap after a long outage (beyond it, the rest is logged as dropped)."""
DOWNLOAD_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
"""Per read and per connect; the pipeline bounds the whole fetch (``media_fetch_timeout_s``)."""


class MatrixChannel(Channel[MatrixConfig]):
    name: ClassVar[str] = "matrix"
    config_model = MatrixConfig

    def __init__(self, context: ChannelContext[MatrixConfig]) -> None:
        super().__init__(context)
        self._client: AsyncClient | None = None
        self._http: httpx.AsyncClient | None = None
        """File downloads (streamed, unlike nio's), apart from the sync connection."""
        self._login = asyncio.Lock()
        self._names: tuple[str, ...] = ()
        self._shown: dict[str, str] = {}
        """event id -> text it was last edited to, so an unchanged final edit is not sent again."""

    @property
    def me(self) -> str:
        return self.settings.user_id

    # ------------------------------------------------------------------ session

    async def _ready(self) -> AsyncClient:
        """The logged-in client; sends may come before ``run`` (resumed replies), so both paths log in."""
        async with self._login:
            if self._client is not None:
                return self._client
            settings = self.settings
            client = new_client(settings.homeserver, settings.user_id, settings.device_id)
            try:
                if settings.access_token is not None:
                    client.restore_login(settings.user_id, settings.device_id or "", settings.access_token.get_secret_value())
                    who = await call("whoami", client.whoami())
                    if who.user_id != settings.user_id:
                        raise AuthFailed("matrix", f"the access token belongs to {who.user_id}, not {settings.user_id}")
                else:
                    assert settings.password is not None
                    login = await call("login", client.login(settings.password.get_secret_value(), device_name=settings.device_name))
                    register_secret(login.access_token, "matrix access token (password login)")
                profile = await call("displayname", client.get_displayname(settings.user_id))
                self._names = tuple(n for n in [getattr(profile, "displayname", None)] if n)
            except BaseException:
                await client.close()
                raise
            log.info("matrix logged in account=%s user=%s device=%s", self.account, settings.user_id, client.device_id)
            self._client = client
            return client

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: MatrixConfig) -> list[Problem]:
        return check_settings(settings)

    async def probe(self) -> ProbeResult:
        problems = self.check(self.settings)
        if problems:
            return ProbeResult(checked=f"{self.settings.user_id}", problems=tuple(problems))
        return await probe_homeserver(self.settings)

    # ------------------------------------------------------------------ inbound

    def _filter(self) -> dict[str, Any]:
        return {"room": {"timeline": {"limit": self.settings.timeline_limit}}, "presence": {"not_types": ["*"]}}

    async def run(self, heartbeat: Heartbeat) -> None:
        client = await self._ready()  # a wrong token fails here, as AuthFailed
        heartbeat.set_state(ChannelState.RUNNING)
        if await self.context.cursors.get(CURSOR) is None:
            await self._first_start(client)
        log.info("matrix syncing account=%s user=%s", self.account, self.me)
        full_state = True  # the first sync of a run loads every room's members (for direct-vs-group)

        async def sync_once(cursor: str | None) -> Batch:  # the cursor is the sync token
            nonlocal full_state
            response = await call("sync", client.sync(
                timeout=int(self.settings.sync_timeout_s * 1000), since=cursor, full_state=full_state,
                sync_filter=self._filter(),
            ))
            full_state = False  # nio has loaded the rooms' state from this answer; a retry need not ask again
            heartbeat.beat()
            await self._invites(client, response)  # a transient failure here is retried from the same token
            return Batch(await self._messages(client, response, cursor, heartbeat), response.next_batch)

        await poll(sync_once, sink=self.context.sink, cursors=self.context.cursors, heartbeat=heartbeat,
                   cursor_name=CURSOR, what="matrix sync")

    async def _first_start(self, client: AsyncClient) -> None:
        """No token yet: one sync that answers nothing takes it, so history from before the gateway is not answered."""
        first = await call("sync", client.sync(timeout=0, sync_filter=self._filter(), full_state=True))
        await self._invites(client, first)  # before the token: a later sync would not list these invites again
        await self.context.cursors.put(CURSOR, first.next_batch)
        skipped = sum(len(room.timeline.events) for room in first.rooms.join.values())
        log.info("matrix first start account=%s: history before now is not answered (%d events)", self.account, skipped)

    async def _invites(self, client: AsyncClient, response: Any) -> None:
        """Join or decline each invitation, by the account's invite policy."""
        for room_id, info in response.rooms.invite.items():
            inviter = next((e.source.get("sender") for e in info.invite_state
                            if getattr(e, "source", {}).get("type") == "m.room.member"
                            and e.source.get("state_key") == self.me), None) or "unknown"
            try:
                if self.settings.invite_allowed(inviter):
                    await call("join", client.join(room_id))
                    log.info("matrix joined account=%s room=%s invited_by=%s", self.account, room_id, inviter)
                else:
                    await call("leave", client.room_leave(room_id))
                    log.info("matrix invite declined account=%s room=%s invited_by=%s reason=invite policy %s",
                             self.account, room_id, inviter, self.settings.invites.value)
            except TransientError:
                raise  # the token is not advanced: the sync is tried again and lists the invite again
            except GatewayError as error:
                log.warning("matrix invite not handled account=%s room=%s reason=%s", self.account, room_id, error)

    async def _messages(self, client: AsyncClient, response: Any, since: str | None, heartbeat: Heartbeat) -> list[InboundMessage]:
        """The sync's messages, decoded; their files are fetched by the pipeline after the sync token is stored."""
        batch: list[InboundMessage] = []
        for room_id, info in response.rooms.join.items():
            events = [e.source for e in info.timeline.events]
            if info.timeline.limited and info.timeline.prev_batch:
                events = await self._gap(client, room_id, info.timeline.prev_batch, since) + events
            events = self._after_invite(room_id, events)
            view = self._view(client, room_id)
            for event in events:
                try:
                    message = await self._decode(client, event, view)
                    heartbeat.beat()
                except InvalidEvent as error:
                    self.context.sink.invalid(str(error))
                    continue
                except Unreadable as refusal:
                    self.context.sink.refused(refusal.rule, refusal.detail)
                    continue
                except Skipped as reason:  # the bot's own streaming edits are routine: logged quietly
                    level = logging.DEBUG if event.get("sender") == self.me else logging.INFO
                    log.log(level, "matrix event not answered account=%s room=%s reason=%s", self.account, room_id, reason)
                    continue
                if message is not None:
                    batch.append(message)
        return batch

    async def _gap(self, client: AsyncClient, room_id: str, prev_batch: str, since: str | None) -> list[dict]:
        """The events a limited timeline left out, oldest first: paged back from ``prev_batch`` to ``since``."""
        older: list[dict] = []
        token = prev_batch
        while len(older) < GAP_LIMIT:
            page = await call("messages", client.room_messages(room_id, start=token, end=since,
                                                               direction=MessageDirection.back, limit=100))
            older.extend(e.source for e in page.chunk)
            if not page.chunk or not page.end or page.end == token:
                break
            token = page.end
        else:
            log.warning("matrix gap too long account=%s room=%s: only the latest %d events were paged in",
                        self.account, room_id, GAP_LIMIT)
        log.info("matrix gap filled account=%s room=%s events=%d", self.account, room_id, len(older))
        return list(reversed(older))

    def _after_invite(self, room_id: str, events: list[dict]) -> list[dict]:
        """Drop what was said in a room before the bot was invited to it: not said to the bot."""
        cut = None
        for index, event in enumerate(events):
            content = object_at(event, "content")
            if (event.get("type") == "m.room.member" and event.get("state_key") == self.me
                    and content.get("membership") == "invite"):
                cut = index
        if cut is None:
            return events
        earlier = sum(1 for e in events[:cut] if e.get("type") == "m.room.message")
        if earlier:
            log.info("matrix history not answered account=%s room=%s events=%d reason=said before the bot was invited",
                     self.account, room_id, earlier)
        return events[cut + 1:]

    def _view(self, client: AsyncClient, room_id: str) -> RoomView:
        room = client.rooms.get(room_id)
        members = room.joined_count + room.invited_count if room else 2
        kind = ConversationKind.DIRECT if members <= 2 else ConversationKind.GROUP
        title = room.named_room_name() if room and kind is ConversationKind.GROUP else None
        return RoomView(room_id=room_id, kind=kind, me=self.me, my_names=self._names, title=title)

    async def _decode(self, client: AsyncClient, event: dict, view: RoomView) -> InboundMessage | None:
        content = object_at(event, "content")
        quoted = None
        if event.get("type") == "m.room.message" and event.get("sender") != self.me and (target := reply_target(content)):
            try:
                quoted = (await call("event", client.room_get_event(view.room_id, target))).event.source
            except GatewayError as error:
                log.info("matrix quoted event unavailable account=%s event=%s reason=%s", self.account, target, error)
        room = client.rooms.get(view.room_id)
        sender = event.get("sender")
        name = (room.user_name(sender) if room and isinstance(sender, str) else None) or ""
        return decode(event, view, account=self.account, sender_name=name, quoted=quoted)

    @asynccontextmanager
    async def fetch_media(self, ref: MediaRef, *, limit: int) -> AsyncIterator[MediaStream]:
        client = await self._ready()
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT, trust_env=False)
        async with fetch(self._http, self.settings.homeserver, client.access_token, ref, limit=limit) as stream:
            yield stream

    # ------------------------------------------------------------------ outbound

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        """One event per part, text or file, under the part's key as txnId (a repeat is the same event)."""
        client = await self._ready()
        room, thread = target.conversation.chat, target.conversation.thread
        in_group = target.conversation.kind is ConversationKind.GROUP
        reply_to = referrer.message if part.index == 0 and (thread or in_group) else None
        asker = referrer.token if reply_to and in_group and referrer.token != self.me else None
        attachment = part.attachment
        if attachment is not None:
            url, size = await upload(client, attachment)
            content = media_content(attachment, url, size=size, thread=thread)
        else:
            content = text_content(part.text, part.plain, thread=thread, reply_to=reply_to, mention=asker)
        sent = await call("send", client.room_send(room, "m.room.message", content, tx_id=idempotency_key))
        log.info("matrix sent account=%s room=%s event=%s part=%d file=%s", self.account, room, sent.event_id,
                 part.index, attachment is not None)
        return SentMessage(message=MessageId(sent.event_id))

    async def edit(self, target: Address, handle: str, part: RenderedPart, *, referrer: Referrer) -> None:
        message = MessageId(handle)  # the event id is the handle
        if self._shown.get(message) == part.text:
            return
        client = await self._ready()
        content = edit_content(message, part.text, part.plain)
        await call("edit", client.room_send(target.conversation.chat, "m.room.message", content,
                                            tx_id=f"edit.{uuid.uuid4().hex}"))
        self._shown[message] = part.text
        if len(self._shown) > 1000:
            self._shown.pop(next(iter(self._shown)))

    async def typing(self, target: Address) -> None:
        client = await self._ready()
        timeout_ms = int((self.capabilities().typing_interval + 5) * 1000)
        await call("typing", client.room_typing(target.conversation.chat, True, timeout=timeout_ms))

    async def close(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()
