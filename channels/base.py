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
It downloads nothing before that: an inbound file is decoded as a
:class:`~gateway.messages.MediaRef`, and the pipeline fetches it after the ack
through :meth:`Channel.fetch_media` (docs/adr/0026-media-after-the-ack.md).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from gateway.core.capabilities import ChannelCapabilities, EditMode, capabilities_of, fetch_limit
from gateway.core.channel import BlobStore, CursorStore, Heartbeat, InboundSink, MediaStream
from gateway.core.config import AccountConfig
from gateway.core.errors import Unsupported
from gateway.core.messages import (
    AccountId,
    Address,
    MediaRef,
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



ConfigT = TypeVar("ConfigT", bound=AccountConfig)
"""A channel's settings model: ``TelegramChannel(Channel[TelegramConfig])`` reads ``self.settings.token`` unchecked-cast-free."""
ConfigT_co = TypeVar("ConfigT_co", bound=AccountConfig, covariant=True)
OtherT = TypeVar("OtherT", bound=AccountConfig)


@dataclass(frozen=True)
class ChannelContext(Generic[ConfigT_co]):
    """Everything a channel is handed by the composition root; it builds nothing of its own.

    Generic over the settings, so a context built from ``cls.config_model`` carries that model's type to the
    channel; the composition root, which holds channels of every kind, sees ``ChannelContext[AccountConfig]``."""

    account: AccountId
    config: ConfigT_co
    sink: InboundSink
    cursors: CursorStore
    data_dir: Path
    partner_name: str | None = None
    """The name of the partner bound to the whole account, for a channel that shows one (the web chat's page)."""
    blobs: BlobStore | None = None
    """Where inbound files are kept, for a channel whose files arrive with the event itself (email's MIME
    parts); every other channel leaves its files to the pipeline (:meth:`Channel.fetch_media`)."""

    def with_config(self, config: OtherT) -> ChannelContext[OtherT]:
        """The same context with settings read into a channel's own model (web chat accepts a bare AccountConfig)."""
        return ChannelContext(self.account, config, self.sink, self.cursors, self.data_dir, self.partner_name, self.blobs)


class Channel(ABC, Generic[ConfigT]):
    """Base of every channel adapter: ``class TelegramChannel(Channel[TelegramConfig])``.

    Subclasses set ``name`` and ``config_model`` (the same model as the type argument); the composition root
    validates the account's settings with ``config_model`` and hands them in, so ``self.settings`` and
    :meth:`check`'s argument have the channel's own type without a cast.  The registry and the root hold
    channels of any settings model (a bare ``Channel``)."""

    name: ClassVar[str]
    config_model: type[ConfigT]
    """Set as a class attribute; not a ``ClassVar`` only because a ``ClassVar`` cannot name a type variable."""

    def __init__(self, context: ChannelContext[ConfigT]) -> None:
        self.context = context
        self.settings: ConfigT = context.config

    @classmethod
    def capabilities(cls) -> ChannelCapabilities:
        return capabilities_of(cls.name)

    @classmethod
    def capabilities_for(cls, settings: ConfigT) -> ChannelCapabilities:
        """The facts for an account with these settings: the platform's row, unless the account's kind
        has a row of its own (a WeChat Official Account against personal WeChat; ADR 0033)."""
        return cls.capabilities()

    @property
    def declared(self) -> ChannelCapabilities:
        """This account's facts (:meth:`capabilities_for` its settings): what the outbound path reads."""
        return self.capabilities_for(self.settings)

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
        return self.declared.edit_mode

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

    async def typing(self, target: Address) -> None:
        """Show a typing indicator once; the outbound path refreshes it at ``typing_interval``.

        Optional: a platform without typing indicators keeps this default, which does nothing."""

    def media_limit(self) -> int:
        """The most bytes of one inbound file this account fetches: the platform's declared limit, unless
        the account's settings say otherwise (a self-hosted server that serves more, a teacher who wants less)."""
        return fetch_limit(self.declared)

    def fetch_media(self, ref: MediaRef, *, limit: int) -> AbstractAsyncContextManager[MediaStream]:
        """Open an inbound file the platform announced, streamed within ``limit`` bytes.

        Called by the pipeline after the event was acknowledged, never on the ack path; the caller bounds
        the time.  Raises from the error tree: :class:`~gateway.errors.TooLarge` past the limit,
        ``Unsupported`` (this default) for a channel that cannot fetch files, which the model then reads
        as a note instead of the file."""
        raise Unsupported(self.name, "this channel cannot fetch files")

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

    def serves_websockets(self) -> bool:
        """Whether :meth:`http_routes` holds a websocket route, so the HTTP server must accept upgrades
        (NapCat's reverse socket); asked once at start, without building the routes."""
        return False

    def login_page(self) -> str | None:
        """The gateway path of a page where a person completes this account's login while it waits for one
        (personal WeChat's QR code), None otherwise.  The console links it for the account's operators."""
        return None

    @classmethod
    def check(cls, settings: ConfigT) -> list[Problem]:
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

    async def close(self) -> None:
        """Release sockets and clients.  Called once, after ``run`` ended (or after ``probe``).

        Optional: a channel that holds nothing open keeps this default, which does nothing."""

