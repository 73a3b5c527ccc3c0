"""An in-memory channel for pipeline tests: the platform is a list.

Pipeline tests exercise the shared path (dedup, lanes, outbox, pacing), not a
transport, so the peer here is the channel's own record of what it was asked
to send.  Channels themselves are tested against real or emulated peers.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from datetime import UTC, datetime

from channels.base import Channel
from gateway.core.capabilities import ChannelCapabilities, Dialect, EditMode, SendRate, TextUnit
from gateway.core.channel import Heartbeat
from gateway.core.config import AccountConfig
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    MessageId,
    Referrer,
    RenderedPart,
    Sender,
    SentMessage,
    StreamChunk,
    StreamHandle,
    Text,
    UserId,
)
from tests.waits import HANG_S

DEFAULT_CAPS = ChannelCapabilities(
    platform="memory", text_limit=200, text_unit=TextUnit.CHARS, dialect=Dialect.PLAIN, authenticates_senders=True,
    elements=frozenset({"text", "link"}), edit_mode=EditMode.EDIT, min_edit_interval=0.05,
    send_rate_chat=SendRate(rate=1000, per=1, burst=1000),
)


def make_message(text, *, event, account="acct", chat="c1", user="u1", kind=ConversationKind.DIRECT,
                 addressed=True, from_self=False, locale="", referrer: Referrer | None = None) -> InboundMessage:
    return InboundMessage(
        event_id=EventId(event),
        address=Address(channel=ChannelName("memory"), account=AccountId(account),
                        conversation=Conversation(chat=ChatId(chat), kind=kind)),
        sender=Sender(user=UserId(user), display_name=user, locale=locale),
        elements=(Text(text=text),),
        received_at=datetime.now(UTC),
        addressed=addressed,
        from_self=from_self,
        referrer=referrer or Referrer(),
    )


@dataclass
class Sent:
    kind: str  # "send" or "edit"; "start", "append" (text: the delta) or "finish" on a native stream
    chat: str
    message: str
    text: str
    key: str = ""
    final: bool = True
    attachments: tuple[str, ...] = ()
    """The names of the files a part carried."""


class MemoryChannel(Channel[AccountConfig]):
    name = "memory"
    config_model = AccountConfig
    caps = DEFAULT_CAPS
    instances: list[MemoryChannel] = []

    def __init__(self, context):
        super().__init__(context)
        self.sent: list[Sent] = []
        self.failures: list[Exception] = []
        self.lost_responses: list[Exception] = []
        """Raised *after* a send took effect: the platform posted it, the answer never came back."""
        self.by_key: dict[str, str] = {}
        self.fail_keys: dict[str, Exception] = {}
        """Raised once by the send whose idempotency key this is (before it takes effect)."""
        self.ids = itertools.count(1)
        self.changed = asyncio.Condition()
        MemoryChannel.instances.append(self)

    @classmethod
    def capabilities(cls) -> ChannelCapabilities:
        return cls.caps

    async def run(self, heartbeat: Heartbeat) -> None:
        while True:
            heartbeat.beat()
            await asyncio.sleep(1)

    def message(self, text, *, event=None, **kw) -> InboundMessage:
        return make_message(text, event=event or f"e{next(self.ids)}", account=self.account, **kw)

    async def inject(self, text, **kw) -> InboundMessage:
        message = self.message(text, **kw)
        await self.context.sink.accept([message])
        return message

    async def _record(self, sent: Sent) -> None:
        async with self.changed:
            self.sent.append(sent)
            self.changed.notify_all()

    async def send(self, target: Address, part: RenderedPart, *, referrer, idempotency_key: str) -> SentMessage:
        if self.failures:
            raise self.failures.pop(0)
        if idempotency_key in self.fail_keys:
            raise self.fail_keys.pop(idempotency_key)
        if idempotency_key in self.by_key:  # the platform deduplicates sends, as Matrix does by txnId
            return SentMessage(message=MessageId(self.by_key[idempotency_key]))
        message_id = self.by_key[idempotency_key] = f"m{next(self.ids)}"
        await self._record(Sent("send", target.conversation.chat, message_id, part.text, idempotency_key, part.final,
                                tuple(a.name for a in part.attachments)))
        if self.lost_responses:
            raise self.lost_responses.pop(0)
        return SentMessage(message=MessageId(message_id))

    async def edit(self, target: Address, handle: str, part: RenderedPart, *, referrer) -> None:
        if self.failures:
            raise self.failures.pop(0)
        await self._record(Sent("edit", target.conversation.chat, handle, part.text, final=part.final))

    async def start(self, target: Address, referrer: Referrer, key: str) -> StreamHandle:
        """A native stream whose handle is the message it becomes (and, like the platform, the same for the same key)."""
        if self.failures:
            raise self.failures.pop(0)
        handle = self.by_key.setdefault(key, f"s{next(self.ids)}")
        await self._record(Sent("start", target.conversation.chat, handle, "", key, final=False))
        return StreamHandle(target=target, referrer=referrer, handle=handle)

    async def append(self, stream: StreamHandle, chunk: StreamChunk) -> None:
        if self.failures:
            raise self.failures.pop(0)
        await self._record(Sent("append", stream.target.conversation.chat, stream.handle, chunk.delta, final=False))

    async def finish(self, stream: StreamHandle, final: RenderedPart) -> SentMessage:
        if self.failures:
            raise self.failures.pop(0)
        await self._record(Sent("finish", stream.target.conversation.chat, stream.handle, final.text))
        return SentMessage(message=MessageId(stream.handle))

    async def wait_for(self, predicate, timeout: float = HANG_S) -> None:
        async def check():
            async with self.changed:
                await self.changed.wait_for(lambda: predicate(self.sent))

        await asyncio.wait_for(check(), timeout)

    def visible(self) -> dict[str, str]:
        """What a user would see now: message id -> latest text."""
        shown: dict[str, str] = {}
        for s in self.sent:
            if s.kind == "append":
                shown[s.message] = shown.get(s.message, "") + s.text
            else:
                shown[s.message] = s.text
        return shown
