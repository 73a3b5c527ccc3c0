"""What a channel and the supervisor say to each other, and what a channel is handed to keep its events.

A running transport proves life through a :class:`Heartbeat` and says which
:class:`ChannelState` it is in; it hands every decoded event to an
:class:`InboundSink` and keeps its positions (poll offsets, sync tokens,
UIDVALIDITY/UID) in a :class:`CursorStore`.  These are vocabulary: a channel
codes against them, the supervisor and the inbound pipeline implement them,
and neither side imports the other.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from gateway.core.messages import Address, InboundMessage


class ChannelState(str, Enum):
    CONNECTING = "connecting"
    RUNNING = "running"
    ACTION_REQUIRED = "action_required"
    """Only a human can help: revoked token, bad config, a QR code to scan."""
    ERROR = "error"
    """Failed; a restart is scheduled (see ``Health.next_restart_at``)."""
    STOPPED = "stopped"


class InboundSink(Protocol):
    async def accept(self, messages: Sequence[InboundMessage]) -> None:
        """Persist the messages (dedup + inbox) and return once they are durable."""
        ...

    def invalid(self, reason: str) -> None:
        """Record an event that could not be decoded (logged, counted, dropped with a reason)."""
        ...

    def refused(self, rule: str, detail: str) -> None:
        """Record an event the channel read but will not pass on by a rule of its platform
        (automatic mail, an encrypted room): ``rule`` is a short, stable label for the metric,
        ``detail`` says which event and why, for the log."""
        ...

    def late_ack(self, took_s: float, deadline_s: float) -> None:
        """Record that a webhook was answered only ``took_s`` after it arrived, past its platform's
        ``deadline_s`` (``channels._kit.ack``): the platform will send it again, and the store is too
        slow for it.  Counted per account in ``partners_late_acks_total``."""
        ...

    async def undelivered(self, target: Address, reason: str) -> None:
        """The platform said, after taking it, that a message we sent ``target`` never arrived (WhatsApp's
        ``failed`` status): counted in ``partners_undelivered_total`` and told to the partner's teacher, as a
        send refused at once would be."""
        ...


class CursorStore(Protocol):
    """Durable per-account positions: poll offsets, sync tokens, UIDVALIDITY/UID."""

    async def get(self, name: str) -> str | None: ...

    async def put(self, name: str, value: str, *, keep_s: float | None = None) -> None:
        """Store ``value`` under ``name``; with ``keep_s`` it is dropped by the store's prune that long after
        its last write (per-message notes: a delivery state, a reply window), else kept for good."""
        ...


class Heartbeat(Protocol):
    """How a running transport tells the supervisor it is alive (implemented by gateway.supervisor)."""

    def beat(self) -> None: ...

    def event(self) -> None: ...

    def set_state(self, state: ChannelState, reason: str | None = None) -> None: ...


@dataclass(frozen=True)
class MediaStream:
    """An inbound file as it arrives (``Channel.fetch_media``): its bytes in chunks, and what the
    platform's server says it is.  ``chunks`` is already bounded by the limit the fetch was asked for
    (``channels._kit.media.limited``); the blob store counts again, so a channel that forgets cannot
    fill the disk."""

    chunks: AsyncIterator[bytes]
    content_type: str = ""
    name: str = ""


@dataclass(frozen=True)
class Blob:
    key: str
    size: int


class BlobStore(Protocol):
    """Where inbound files live once fetched, by the hash of their bytes (``gateway.blobs``)."""

    async def put(self, chunks: AsyncIterable[bytes], *, limit: int, suffix: str = "") -> Blob:
        """Store the bytes (at most ``limit``, else ``TooLarge`` and nothing kept) under their hash."""
        ...

    async def get(self, key: str) -> bytes:
        """The bytes of a stored blob; ``KeyError`` when there is none."""
        ...

    def url(self, key: str) -> str:
        """Where the blob can be read from (``file://`` for a local folder)."""
        ...
