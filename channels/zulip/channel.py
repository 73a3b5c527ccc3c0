"""ZulipChannel: a bot on Zulip's event queue, with the queue, its last event and the last message in the cursor.

**Inbound: one queue, one cursor.**  The channel registers an event queue for
``message`` events (raw Markdown, ``apply_markdown=false``) and long-polls
``GET /events`` through the kit's loop (:mod:`channels._kit.longpoll`), which
stores the cursor only after ``sink.accept`` returned.  The cursor is the
queue id, the last event id (heartbeats included) and the last message id, so
a restart within Zulip's ten minutes resumes the same queue and is handed
again every event after the last durable one.

**A lost queue, without a gap.**  Zulip garbage-collects a queue nobody polled
for ten minutes (and forgets them all when it restarts) and then answers
``BAD_EVENT_QUEUE_ID``.  The channel registers a new queue first and then reads
``GET /messages`` after the last durable message id, so everything said while
no queue existed comes by the read and everything after by the new queue; a
message both bring is one message to the inbox, whose dedup key is Zulip's
message id.  A first start (no cursor) begins at the server's newest message.

**Outbound** is ``POST /messages`` into the conversation (decode.py: a person, a
group DM, or a stream's topic), and streaming edits its text in place
(``PATCH /messages/{id}``).  Zulip takes no idempotency key, so the outbound
path lets one send per account be unrecorded at a time (ADR 0022; ADR 0048 says
why the ``local_id`` echo is not used for it).
"""

from __future__ import annotations

import asyncio
import logging
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from channels._kit.longpoll import Batch, poll
from channels.base import Channel, ChannelContext
from channels.zulip.config import ZulipConfig
from channels.zulip.decode import Me, decode, parse
from channels.zulip.encode import where
from channels.zulip.transport import PLATFORM, QueueGone, ZulipApi
from gateway.core.capabilities import ChannelCapabilities, SendRate
from gateway.core.channel import ChannelState, Heartbeat
from gateway.core.errors import AuthFailed, InvalidEvent, PlatformError, Unsupported
from gateway.core.messages import Address, InboundMessage, MessageId, Referrer, RenderedPart, SentMessage
from gateway.core.probes import ProbeResult, Problem

log = logging.getLogger(__name__)
CURSOR = "queue"


class QueueCursor(BaseModel):
    """What the account's cursor store holds: the queue, the last durable event in it, the last durable message."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    queue_id: str | None = None
    last_event_id: int = -1
    last_message_id: int | None = None

    @classmethod
    def read(cls, raw: str | None) -> QueueCursor:
        if not raw:
            return cls()
        try:
            return cls.model_validate_json(raw)
        except ValidationError:
            log.warning("zulip cursor unreadable, registering afresh cursor=%s", raw[:80])
            return cls()


class ZulipChannel(Channel[ZulipConfig]):
    name: ClassVar[str] = "zulip"
    config_model = ZulipConfig

    def __init__(self, context: ChannelContext[ZulipConfig]) -> None:
        super().__init__(context)
        self._api: ZulipApi | None = None
        self._me: Me | None = None
        self._me_lock = asyncio.Lock()

    @classmethod
    def capabilities_for(cls, settings: ZulipConfig) -> ChannelCapabilities:
        """The platform's row, paced to the server's own API limit where the account names one."""
        caps = cls.capabilities()
        per_minute, row = settings.api_rate_per_minute, caps.send_rate_global
        if per_minute is None or row is None:
            return caps
        return caps.model_copy(update={"send_rate_global": SendRate(rate=per_minute, per=60.0, burst=max(row.burst, per_minute // 10))})

    @property
    def api(self) -> ZulipApi:
        if self._api is None:
            s = self.settings
            self._api = ZulipApi(str(s.site), str(s.email), s.key, poll_timeout_s=s.poll_timeout_s)
        return self._api

    async def whoami(self) -> Me:
        async with self._me_lock:
            if self._me is None:
                found = await self.api.me()
                self._me = Me(user_id=int(found.get("user_id", -1)), full_name=str(found.get("full_name", "")))
        return self._me

    # ------------------------------------------------------------------ inbound

    async def run(self, heartbeat: Heartbeat) -> None:
        me = await self.whoami()  # a refused key ends the run here, as AuthFailed
        heartbeat.set_state(ChannelState.RUNNING)
        log.info("zulip polling account=%s bot=%s", self.account, me.user_id)
        await poll(self._fetch, sink=self.context.sink, cursors=self.context.cursors, heartbeat=heartbeat,
                   cursor_name=CURSOR, what="zulip events")

    async def _fetch(self, cursor: str | None) -> Batch:
        state = QueueCursor.read(cursor)
        if state.queue_id is None:
            return await self._register(state)
        try:
            events = await self.api.events(state.queue_id, state.last_event_id)
        except QueueGone:
            log.info("zulip queue gone, registering and catching up account=%s after_message=%s",
                     self.account, state.last_message_id)
            return await self._register(state)
        me = await self.whoami()
        messages: list[InboundMessage] = []
        last_event, last_message = state.last_event_id, state.last_message_id
        for event in events:
            if not isinstance(event, dict) or not isinstance(event.get("id"), int):
                self.context.sink.invalid(f"zulip event without an id: {str(event)[:100]}")
                continue
            last_event = max(last_event, event["id"])
            if event.get("type") != "message":
                continue  # heartbeats: their id moves the cursor on, nothing more
            found = self._decode(event.get("message"), event.get("flags"), me)
            if found is not None:
                messages.append(found)
                last_message = max(last_message or 0, int(found.event_id))
        return Batch(messages, self._cursor(state.queue_id, last_event, last_message))

    async def _register(self, cursor: QueueCursor) -> Batch:
        """A new queue, then what was said after the last durable message and before the queue began."""
        registered = await self.api.register()
        queue_id, last_event = registered.get("queue_id"), registered.get("last_event_id")
        if not isinstance(queue_id, str) or not isinstance(last_event, int):
            raise InvalidEvent("zulip register: the answer named no queue_id or last_event_id")
        me = await self.whoami()
        messages: list[InboundMessage] = []
        anchor = cursor.last_message_id
        if anchor is None:
            newest = registered.get("max_message_id")
            anchor = newest if isinstance(newest, int) else None
        else:
            while True:
                found, newest_reached = await self.api.messages_after(anchor, self.settings.catch_up_batch)
                for raw in found:
                    decoded = self._decode(raw, raw.get("flags") if isinstance(raw, dict) else None, me)
                    if isinstance(raw, dict) and isinstance(raw.get("id"), int):
                        anchor = max(anchor, raw["id"])
                    if decoded is not None:
                        messages.append(decoded)
                if newest_reached or not found:
                    break
            log.info("zulip caught up account=%s messages=%d", self.account, len(messages))
        return Batch(messages, self._cursor(queue_id, last_event, anchor))

    def _decode(self, raw: object, flags: object, me: Me) -> InboundMessage | None:
        try:
            message = decode(parse(raw, flags), account=self.account, me=me)
        except InvalidEvent as error:
            self.context.sink.invalid(str(error))
            return None
        if not message.from_self:
            log.info("zulip message in account=%s chat=%s message=%s", self.account,
                     message.address.conversation.key, message.event_id)
        return message

    @staticmethod
    def _cursor(queue_id: str, last_event: int, last_message: int | None) -> str:
        return QueueCursor(queue_id=queue_id, last_event_id=last_event, last_message_id=last_message).model_dump_json()

    # ------------------------------------------------------------------ outbound

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        if part.attachment is not None or not part.text.strip():
            raise Unsupported(PLATFORM, "this release sends text only (files are not uploaded yet)")
        to = where(target, default_topic=self.settings.default_topic)
        sent = await self.api.send(kind=to.kind, to=to.to, content=part.text, topic=to.topic)
        log.info("zulip sent account=%s chat=%s message=%s part=%d", self.account, target.conversation.key, sent,
                 part.index)
        return SentMessage(message=MessageId(str(sent)))

    async def edit(self, target: Address, handle: str, part: RenderedPart, *, referrer: Referrer) -> None:
        if not handle.isdigit():
            raise Unsupported(PLATFORM, f"not a Zulip message id: {handle[:40]!r}")
        if part.text.strip():
            await self.api.edit(int(handle), part.text)

    async def typing(self, target: Address) -> None:
        await self.api.typing(where(target, default_topic=self.settings.default_topic).typing())

    # ------------------------------------------------------------------ doctor

    @classmethod
    def check(cls, settings: ZulipConfig) -> list[Problem]:
        problems = []
        if not str(settings.site).startswith(("http://", "https://")):
            problems.append(Problem(message=f"site {settings.site!r} is not an http(s) address",
                                    fix="write the organization's address, e.g. https://school.zulipchat.com"))
        if "@" not in str(settings.email):
            problems.append(Problem(message=f"email {settings.email!r} is not the bot's email",
                                    fix="copy the bot's email from Settings -> Bots (or use its zuliprc)"))
        if not settings.key.strip():
            problems.append(Problem(message="the API key is empty",
                                    fix="copy the bot's API key from Settings -> Bots into the environment variable"))
        return problems

    async def probe(self) -> ProbeResult:
        """``GET /users/me`` with the bot's key: reads nothing the bot would answer, moves no queue."""
        problems = list(self.check(self.settings))
        if not problems:
            try:
                await self.whoami()
            except AuthFailed:
                problems.append(Problem(message="Zulip refused the bot's email and API key",
                                        fix="copy the key again from Settings -> Bots (it changes when regenerated)"))
            except PlatformError as error:
                problems.append(Problem(message=f"Zulip did not answer: {error}", fix="check site and the network"))
        return ProbeResult(checked=f"the bot's key against {self.settings.site}/api/v1/users/me",
                           problems=tuple(problems))

    async def close(self) -> None:
        """The queue is left to expire, not deleted: a restart within ten minutes resumes it."""
        api, self._api = self._api, None
        if api is not None:
            await api.close()
