"""The channel contract: what every transport adapter is, and what it is handed.

A channel runs its transport, decodes platform events into
:class:`~gateway.core.messages.InboundMessage`, encodes and sends rendered parts,
edits, and closes -- nothing else.  It does not retry, split, pace or decide
policy: the one outbound path does that for all channels, reading the
channel's :class:`~gateway.core.capabilities.ChannelCapabilities`.

A channel also says whether its settings can work: :meth:`Channel.check` finds
what the settings alone show (an empty token, a placeholder host) without the
network, and :meth:`Channel.probe` asks the platform one harmless question
(who am I?) with the account's credentials.  ``partners doctor`` runs both,
``serve`` refuses to start on what ``check`` finds.

Outbound, a channel is handed :class:`~gateway.messages.RenderedPart` values: the text in its
dialect with a plain-text twin from the same parse, or one file (an attachment part).  Every
part comes with its idempotency key, derived in one place (:mod:`gateway.pipeline.outbox`).
What a channel needs to touch a message again is the opaque ``handle`` it returns in
:class:`~gateway.messages.SentMessage`; the outbox stores it and hands it back.  How a reply is
shown while it is written follows :meth:`Channel.stream_mode` (by default the declared
``edit_mode``): ``edit`` sends a preview and calls :meth:`Channel.edit`; ``native_stream`` calls
:meth:`Channel.start`, :meth:`Channel.append` and :meth:`Channel.finish`; ``none`` sends the
final text only (docs/adr/0025-the-outbound-contract.md).

Delivery guarantees start here: a channel acknowledges the platform (answers
the webhook, advances the poll offset, acks the stream frame) only after
``await sink.accept(...)`` returned, because that is when the event is durable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from gateway.core.capabilities import ChannelCapabilities, EditMode, capabilities_of
from gateway.core.channel import CursorStore, Heartbeat, InboundSink
from gateway.core.config import AccountConfig
from gateway.core.errors import Unsupported
from gateway.core.messages import (
    AccountId,
    Address,
    Referrer,
    RenderedPart,
    SentMessage,
    StreamChunk,
    StreamHandle,
)
from gateway.core.probes import ProbeResult, Problem

if TYPE_CHECKING:  # pragma: no cover - typing only; channels never import starlette at module level
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import BaseRoute



@dataclass(frozen=True)
class ChannelContext:
    """Everything a channel is handed by the composition root; it builds nothing of its own."""

    account: AccountId
    config: AccountConfig
    sink: InboundSink
    cursors: CursorStore
    data_dir: Path
    partner_name: str | None = None
    """The name of the partner bound to the whole account, for a channel that shows one (the web chat's page)."""


class Channel(ABC):
    """Base of every channel adapter.  Subclasses set the three class attributes."""

    name: ClassVar[str]
    config_model: ClassVar[type[AccountConfig]] = AccountConfig

    def __init__(self, context: ChannelContext) -> None:
        self.context = context

    @classmethod
    def capabilities(cls) -> ChannelCapabilities:
        return capabilities_of(cls.name)

    @property
    def account(self) -> AccountId:
        return self.context.account

    @abstractmethod
    async def run(self, heartbeat: Heartbeat) -> None:
        """Run the inbound transport until cancelled.  Raise on failure; the supervisor restarts."""

    @abstractmethod
    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        """Send one rendered part: text (``part.text``, with ``part.plain`` its plain twin) or one file
        (``part.attachment``).  ``idempotency_key`` is stable across retries and restarts; pass it to the
        platform where the platform deduplicates sends (Matrix txnId, QQ msg_seq).  One part is one
        platform message: a channel keeps no progress of its own between retries."""

    def stream_mode(self, target: Address) -> EditMode:
        """How a reply to ``target`` is shown while it is written: the declared ``edit_mode``.

        A channel whose platform streams natively in some conversations only (Telegram's drafts are
        for private chats) says so here; the outbound path never guesses from which methods exist."""
        return self.capabilities().edit_mode

    async def edit(self, target: Address, handle: str, part: RenderedPart, *, referrer: Referrer) -> None:
        """Replace the text of a sent message (``edit`` mode).  ``handle`` is what this channel returned
        in ``SentMessage.handle`` (or its message id); ``part.final`` says whether more edits follow."""
        raise Unsupported(self.name, "editing messages is not supported")

    async def start(self, target: Address, referrer: Referrer, key: str) -> StreamHandle:
        """Open a native stream for a reply (``native_stream`` mode); ``key`` is the reply's stream key,
        stable across restarts, for a platform that can use it to find the same stream again."""
        raise Unsupported(self.name, "native streams are not supported")

    async def append(self, stream: StreamHandle, chunk: StreamChunk) -> None:
        """Show more of the answer on an open stream: ``chunk.delta`` for a platform that appends,
        ``chunk.so_far`` for one that replaces the whole text."""
        raise Unsupported(self.name, "native streams are not supported")

    async def finish(self, stream: StreamHandle, final: RenderedPart) -> SentMessage:
        """Close the stream showing ``final`` (the reply's first part) and return the message that stays."""
        raise Unsupported(self.name, "native streams are not supported")

    async def typing(self, target: Address) -> None:  # noqa: B027 -- an optional hook, not an abstract method
        """Show a typing indicator once; the outbound path refreshes it at ``typing_interval``.

        Optional: a platform without typing indicators keeps this default, which does nothing."""

    async def handle_webhook(self, request: Request) -> Response:
        """Webhook-mode channels verify, decode, ``await sink.accept`` and only then answer 2xx."""
        raise Unsupported(self.name, "this channel has no webhook")

    async def verify_webhook(self, request: Request) -> Response:
        """Answer the platform's GET on the webhook URL: Meta's ``hub.challenge``, WeChat's ``echostr``
        (see :mod:`channels._kit.challenges`).  The default answers 405: most platforms only POST."""
        raise Unsupported(self.name, "this channel answers no GET on its webhook")

    def http_routes(self) -> list[BaseRoute]:
        """Routes this channel serves itself (webchat's page and API), mounted by the HTTP app
        under ``/channels/{name}/{account}``.  Most channels serve none."""
        return []

    @classmethod
    def check(cls, settings: AccountConfig) -> list[Problem]:
        """Problems the validated settings show without asking the platform: a token that cannot be one,
        a host copied from an example, a webhook URL the platform will refuse.  No network, no side effects."""
        return []

    async def probe(self) -> ProbeResult:
        """Ask the platform whether this account's endpoint and credentials work, without side effects
        (no message read, sent or acknowledged).  Never raises for a platform's answer: each problem is
        reported in plain words with its fix, and no secret appears in it.  The caller bounds the time
        and calls :meth:`close` afterwards.  Channels with nothing to reach (web chat, console) pass."""
        return ProbeResult(checked="served by the gateway itself, nothing to reach",
                           problems=tuple(self.check(self.context.config)))

    async def close(self) -> None:  # noqa: B027 -- an optional hook, not an abstract method
        """Release sockets and clients.  Called once, after ``run`` ended (or after ``probe``).

        Optional: a channel that holds nothing open keeps this default, which does nothing."""

