"""MattermostChannel: one bot account on a Mattermost server, by its websocket events and REST API v4.

Inbound.  The kit's websocket :class:`~channels._kit.websocket.Session` dials
``/api/v4/websocket`` (the token also as a Bearer, so a wrong one is refused at
the handshake), reads the server's ``hello`` and sends the
``authentication_challenge``; its ``OK`` answer is the session's READY.  Each
``posted`` event is decoded (decode.py) and accepted into the inbox before the
next frame is read; the inbox dedups by post id.  Signs of life are websocket
pings on the kit's schedule: Mattermost has no heartbeat of its own.

Exactly once.  Mattermost replays nothing a closed socket missed, so on every
READY a catch-up (catchup.py) reads each of the bot's channels over REST from
the last post made durable there.  Until a channel is caught up, live posts in
it do not move its position, so a process killed mid-catch-up reads the same
posts again next time -- and the dedup answers them once.  A post that could
not be stored ends the run; the restart's catch-up fetches it again.

Outbound, one part is one ``POST /posts``, in a thread (``root_id``) when the
learner wrote in one or, in channels, under the learner's post
(``thread_replies``).  A streamed answer is that post patched in place
(``PUT /posts/{id}/patch``), at most once per ``min_edit_interval``
(platforms.toml).  Files are uploaded (``POST /files``) and attached by id;
images given by URL ride as a message attachment's ``image_url``.  Mattermost
takes no idempotency key (``pending_post_id`` is a client's tag for its own
optimistic display, sent but not relied on), so a send whose answer was lost
may show twice (ADR 0022 bounds it to one per account; ADR 0047).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import ClassVar

from cachetools import TTLCache

from channels._kit.media import download
from channels._kit.websocket import NO_AUTH_CLOSES, NO_CLOSE_CODES, Frame, FrameKind, Resume, Session, Wire
from channels.base import Channel, ChannelContext
from channels.mattermost.catchup import CURSOR, Positions
from channels.mattermost.config import MattermostConfig
from channels.mattermost.decode import AUTH_SEQ, Post, Where, frame_of, message_of, parse, read_post
from channels.mattermost.transport import PLATFORM, MattermostApi, Me
from gateway.core.capabilities import capabilities_of
from gateway.core.channel import ChannelState, Heartbeat, MediaStream
from gateway.core.errors import AuthFailed, BadRequest, InvalidEvent, PlatformError, Unsupported
from gateway.core.messages import (
    Address,
    Attachment,
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
UPLOAD_LIMIT = capabilities_of(PLATFORM).media_max_bytes
OURS_KEPT, OURS_TTL_S = 5000, 7 * 86400.0


class MattermostWire:
    """The kit session's words for Mattermost: hello first, then the token; websocket pings as heartbeats."""

    greets = True
    heartbeat_interval = 30.0
    opens_ready = False
    auth_failed_close_codes = NO_AUTH_CLOSES  # a refused token is a FAIL answer to the challenge (decode.py)
    identify_again_close_codes = NO_CLOSE_CODES  # nothing is resumed: every connection authenticates afresh

    def __init__(self, channel: MattermostChannel) -> None:
        self.channel = channel

    async def endpoint(self, resume: Resume | None) -> str:
        return self.channel.settings.websocket_url

    def identify(self, resume: Resume | None) -> Wire | None:
        self.channel.behind = None  # until the catch-up lists the channels, every one of them is behind
        token = self.channel.settings.token.get_secret_value()
        return json.dumps({"seq": AUTH_SEQ, "action": "authentication_challenge", "data": {"token": token}})

    def heartbeat(self, sequence: int | None) -> Wire | None:
        return None

    def read(self, wire: Wire) -> Frame:
        return self.channel.read(wire)


class _Durable:
    """The inbox, and after it the post's channel position: what both the socket and a catch-up accept into."""

    def __init__(self, channel: MattermostChannel) -> None:
        self.channel, self.sink = channel, channel.context.sink

    async def accept(self, messages: Sequence[InboundMessage]) -> None:
        await self.channel.accept(messages)

    def invalid(self, reason: str) -> None:
        self.sink.invalid(reason)


class MattermostChannel(Channel[MattermostConfig]):
    name: ClassVar[str] = "mattermost"
    config_model = MattermostConfig

    def __init__(self, context: ChannelContext[MattermostConfig]) -> None:
        super().__init__(context)
        register_secret(self.settings.token, "mattermost token")
        self._api: MattermostApi | None = None
        self._me: Me | None = None
        self._session: Session | None = None
        self._positions: Positions | None = None
        self.behind: set[str] | None = set()
        """Channels a catch-up has yet to read (None: all of them, until it has listed them)."""
        self._times: dict[str, tuple[str, int]] = {}
        """Post id -> (channel, create_at) for posts handed to the inbox, until they are durable."""
        self._ours: TTLCache[str, bool] = TTLCache(OURS_KEPT, ttl=OURS_TTL_S)
        """The bot's own posts and the threads it answered in: a reply there addresses it in a channel."""
        self._ready_to_catch_up = asyncio.Event()
        self._in_order = asyncio.Lock()
        self._seq = itertools.count(AUTH_SEQ + 1)

    @property
    def api(self) -> MattermostApi:
        if self._api is None:
            self._api = MattermostApi(self.settings.api, self.settings.token.get_secret_value())
        return self._api

    async def _ready(self) -> Me:
        if self._me is None:
            self._me = await self.api.me()
        return self._me

    # ------------------------------------------------------------------ inbound

    def read(self, wire: Wire) -> Frame:
        assert self._me is not None, "run() asks who the bot is before the socket opens"
        frame = frame_of(parse(wire), account=self.account, me=self._me, ours=self._ours.__contains__,
                         seen=self._seen)
        if frame.kind is FrameKind.READY:
            self._ready_to_catch_up.set()
        return frame

    def _seen(self, post: Post) -> None:
        self._times[post.id] = (post.channel_id, post.create_at)

    async def run(self, heartbeat: Heartbeat) -> None:
        heartbeat.set_state(ChannelState.CONNECTING)
        me = await self._ready()
        self._positions = Positions(await self.context.cursors.get(CURSOR))
        token = self.settings.token.get_secret_value()
        self._session = Session(MattermostWire(self), sink=_Durable(self), cursors=self.context.cursors,
                                heartbeat=heartbeat, what=PLATFORM, open_timeout=self.settings.open_timeout_s,
                                headers={"Authorization": f"Bearer {token}"})
        log.info("mattermost connecting account=%s bot=%s url=%s", self.account, me.username, self.settings.url)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._session.run())
                group.create_task(self._catch_ups(heartbeat))
        except BaseExceptionGroup as failed:
            raise failed.exceptions[0] from None
        finally:
            self._session = None

    async def accept(self, messages: Sequence[InboundMessage]) -> None:
        """Into the inbox, then each post's channel moves past it -- unless a catch-up has yet to read that
        channel, whose position must not pass the posts it will fetch."""
        async with self._in_order:
            await self.context.sink.accept(messages)
            moved = False
            for message in messages:
                where, at = self._times.pop(str(message.event_id), (str(message.address.conversation.chat), 0))
                log.info("mattermost message in account=%s chat=%s message=%s", self.account, where, message.event_id)
                if self._positions is not None and at and self.behind is not None and where not in self.behind:
                    moved = self._positions.advance(where, at) or moved
            if moved and self._positions is not None:
                await self.context.cursors.put(CURSOR, self._positions.dump())

    async def _catch_ups(self, heartbeat: Heartbeat) -> None:
        while True:
            await self._ready_to_catch_up.wait()
            self._ready_to_catch_up.clear()
            await self._catch_up(heartbeat)

    async def _catch_up(self, heartbeat: Heartbeat) -> None:
        """Every channel of the bot with posts past its position, oldest first."""
        me, positions = await self._ready(), self._positions
        assert positions is not None
        channels = await self.api.my_channels()
        self.behind = behind = {str(c.get("id")) for c in channels}  # a reconnect meanwhile makes a new one
        horizon = int((time.time() - self.settings.catch_up_max_age_s) * 1000)
        listed, fetched = max([int(c.get("last_post_at") or 0) for c in channels] or [0]), 0
        for channel in channels:
            where, since = str(channel.get("id")), positions.since(str(channel.get("id")), horizon)
            if since is not None and int(channel.get("last_post_at") or 0) > since:
                found = Where(channel_type=str(channel.get("type") or ""), title=str(channel.get("display_name") or ""))
                for raw in await self.api.posts_since(where, since):
                    fetched += await self._caught(raw, found, me, since)
                    heartbeat.beat()
            async with self._in_order:
                behind.discard(where)
        async with self._in_order:
            positions.caught_up(listed)
            await self.context.cursors.put(CURSOR, positions.dump())
        log.info("mattermost caught up account=%s channels=%d posts=%d", self.account, len(channels), fetched)

    async def _caught(self, raw: object, where: Where, me: Me, since: int) -> int:
        try:
            post = read_post(raw)
        except InvalidEvent as error:
            self.context.sink.invalid(str(error))
            return 0
        message = message_of(post, where, account=self.account, me=me, ours=self._ours.__contains__)
        if post.create_at < since or message is None:
            return 0  # an older post edited since, or a system message
        async with self._in_order:
            await self.context.sink.accept([message])
            if self._positions is not None and self._positions.advance(post.channel_id, post.create_at):
                await self.context.cursors.put(CURSOR, self._positions.dump())
        return 1

    def media_limit(self) -> int:
        return self.settings.max_download_bytes or super().media_limit()

    @asynccontextmanager
    async def fetch_media(self, ref: MediaRef, *, limit: int) -> AsyncIterator[MediaStream]:
        """A post's file by id (``GET /files/{id}``), with the bot's token, streamed within the limit by the kit."""
        async with download(self.api.client, self.api.file_url(ref.locator), limit=limit, platform=PLATFORM,
                            declared_type=ref.mime_type, name=ref.name) as stream:
            yield stream

    # ------------------------------------------------------------------ outbound

    def _root(self, target: Address, referrer: Referrer) -> str | None:
        conversation = target.conversation
        if conversation.thread:
            return conversation.thread
        if conversation.kind is ConversationKind.GROUP and self.settings.thread_replies and referrer.message:
            return str(referrer.message)
        return None

    async def _upload(self, channel: str, attachment: Attachment) -> str:
        path = Path(attachment.path or "")
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as error:
            raise BadRequest(PLATFORM, f"attachment {path.name} cannot be read: {error.strerror}") from None
        if len(data) > UPLOAD_LIMIT:
            raise BadRequest(PLATFORM, f"attachment {path.name} is {len(data)} bytes; Mattermost takes at most {UPLOAD_LIMIT}")
        return await self.api.upload(channel, attachment.name or path.name, data, attachment.mime_type)

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        me = await self._ready()
        channel, root = str(target.conversation.chat), self._root(target, referrer)
        files = [await self._upload(channel, a) for a in part.attachments if a.path]
        images = [{"fallback": a.name or "image", "image_url": a.url}
                  for a in part.attachments if a.url and not a.path and a.kind == "image"]
        links = [f"[{a.name or a.url}]({a.url})" for a in part.attachments if a.url and not a.path and a.kind != "image"]
        text = "\n".join([part.text, *links]) if links else part.text
        if not text.strip() and not files and not images:
            raise Unsupported(PLATFORM, "a part with neither text nor attachments cannot be sent")
        pending = f"{me.id}:{hashlib.sha256(idempotency_key.encode()).hexdigest()[:13]}"
        post = await self.api.create_post(channel, text, root_id=root, file_ids=files, pending=pending,
                                          props={"attachments": images} if images else None)
        sent = str(post.get("id") or "")
        if not sent:
            raise BadRequest(PLATFORM, "posts: the answer named no post id")
        self._ours[sent] = True
        if root:
            self._ours[root] = True
        log.info("mattermost message out account=%s chat=%s message=%s part=%d", self.account, channel, sent, part.index)
        return SentMessage(message=MessageId(sent))

    async def edit(self, target: Address, handle: str, part: RenderedPart, *, referrer: Referrer) -> None:
        await self.api.patch_post(handle, part.text)

    async def typing(self, target: Address) -> None:
        """``user_typing`` on the socket; between connections there is no socket and no indicator."""
        session = self._session
        if session is not None:
            await session.send(json.dumps({"action": "user_typing", "seq": next(self._seq), "data": {
                "channel_id": str(target.conversation.chat), "parent_id": target.conversation.thread or ""}}))

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: MattermostConfig) -> list[Problem]:
        problems = []
        if not settings.token.get_secret_value().strip():
            problems.append(Problem(message="the bot's access token is empty",
                                    fix="put the bot account's access token into the environment variable named"))
        if not settings.url.startswith(("http://", "https://")):
            problems.append(Problem(message=f"url {settings.url!r} is not an http(s) address",
                                    fix="use the address people open Mattermost at, such as https://chat.school.example"))
        return problems

    async def probe(self) -> ProbeResult:
        """``GET /users/me`` with the token: reads nothing the bot would answer."""
        problems = list(self.check(self.settings))
        if not problems:
            try:
                await self.api.me()
            except AuthFailed:
                problems.append(Problem(message="Mattermost refused the bot's access token",
                                        fix="make a new token under Integrations > Bot Accounts and put it in the environment"))
            except PlatformError as error:
                problems.append(Problem(message=f"Mattermost did not answer: {error}", fix="check url and the network"))
        return ProbeResult(checked="the access token against /api/v4/users/me", problems=tuple(problems))

    async def close(self) -> None:
        api, self._api = self._api, None
        if api is not None:
            await api.close()
