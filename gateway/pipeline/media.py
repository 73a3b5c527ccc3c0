"""Media after the ack: fetch a message's files into the blob store before its turn.

A channel decodes an inbound file as a :class:`~gateway.messages.MediaRef`
and acknowledges the event as soon as it is durable; nothing is downloaded on
the ack path, which is what lets a platform's 3-second deadline hold.  Here,
in the conversation's lane just before the turn, each announced file is
fetched through its channel (:meth:`channels.base.Channel.fetch_media`) into
the :class:`~gateway.blobs.BlobStore`, within the account's size limit and the
pipeline's time limit.

What the fetch found is recorded in the message's inbox row before the turn
starts (:meth:`gateway.store.Store.record_media`): a restart after it reuses
the blob, a crash before it fetches again (content-addressed, so the blob is
stored once).  A file that cannot be fetched -- too large by its declared size
or by what arrived, a refused or timed-out download, a channel that cannot
fetch -- keeps no blob and says why in ``Media.missing``, which the model reads
as a note; the message is answered all the same, never lost for its file.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
from collections.abc import Callable

from channels.base import Channel
from gateway.blobs import BlobStore
from gateway.core.errors import GatewayError, PermanentError, TooLarge, TransientError, Unsupported
from gateway.core.messages import Element, InboundMessage, Media, MediaRef
from gateway.store import InboxStore

log = logging.getLogger(__name__)


def awaits_fetch(message: InboundMessage) -> bool:
    """Whether the message announces a file not yet fetched nor given up on."""
    return any(isinstance(e, Media) and e.awaiting_fetch for e in message.elements)


def _suffix(media: Media, content_type: str, name: str) -> str:
    """The blob's extension, so a reader can tell a photo from a PDF: the name's, else the type's."""
    for candidate in (name, media.name):
        tail = candidate.rsplit(".", 1)[-1] if "." in candidate else ""
        if 0 < len(tail) <= 10 and tail.isascii() and tail.isalnum():
            return "." + tail.lower()
    return mimetypes.guess_extension(content_type or "") or ""


def _reason(error: BaseException, timeout_s: float) -> str:
    """The few words the model reads about why; a platform's detail, never a URL or token."""
    if isinstance(error, TooLarge):
        return error.detail
    if isinstance(error, TimeoutError):
        return f"the download took longer than {timeout_s:g} s"
    if isinstance(error, Unsupported):
        return f"{error.platform} files cannot be fetched by the gateway"
    if isinstance(error, TransientError):
        return f"{error.platform} did not hand it over ({error.detail})"
    if isinstance(error, PermanentError):
        return f"{error.platform} refused it ({error.detail})"
    if isinstance(error, GatewayError):
        return str(error)
    if isinstance(error, OSError):
        return "it could not be stored"
    return "it could not be fetched"


class MediaFetch:
    """The pipeline step: ``await resolve(message)`` returns the message with its files fetched or noted."""

    def __init__(self, store: InboxStore, blobs: BlobStore, channel_for: Callable[[str, str], Channel | None],
                 *, timeout_s: float) -> None:
        self.store = store
        self.blobs = blobs
        self.channel_for = channel_for
        self.timeout_s = timeout_s

    async def resolve(self, message: InboundMessage) -> InboundMessage:
        if not awaits_fetch(message):
            return message
        channel = self.channel_for(message.address.channel, message.address.account)
        elements: list[Element] = []
        for element in message.elements:
            if isinstance(element, Media) and element.awaiting_fetch and element.ref is not None:
                element = await self._fetch(channel, element, element.ref, message)
            elements.append(element)
        resolved = message.model_copy(update={"elements": tuple(elements)})
        await self.store.record_media(resolved)
        return resolved

    async def _fetch(self, channel: Channel | None, media: Media, ref: MediaRef, message: InboundMessage) -> Media:
        where = f"platform={message.address.channel} account={message.address.account} event={message.event_id}"
        if channel is None:
            return self._missing(media, "its channel is not running", where)
        limit = channel.media_limit()
        if ref.size is not None and ref.size > limit:
            return self._missing(media, TooLarge(channel.name, limit, ref.size).detail, where)
        try:
            async with asyncio.timeout(self.timeout_s):
                async with channel.fetch_media(ref, limit=limit) as stream:
                    blob = await self.blobs.put(stream.chunks, limit=limit,
                                                suffix=_suffix(media, stream.content_type, stream.name))
        except asyncio.CancelledError:
            raise
        except Exception as error:  # every failure is a note, never a lost message
            if not isinstance(error, (GatewayError, OSError, TimeoutError)):
                log.exception("media fetch failed unexpectedly %s", where)
            return self._missing(media, _reason(error, self.timeout_s), where)
        log.info("media fetched %s kind=%s bytes=%d blob=%s", where, media.kind, blob.size, blob.key)
        mime = stream.content_type or media.mime_type
        return media.model_copy(update={"blob": blob.key, "size": blob.size, "mime_type": mime,
                                        "name": media.name or stream.name})

    @staticmethod
    def _missing(media: Media, reason: str, where: str) -> Media:
        log.info("media not fetched %s kind=%s reason=%s", where, media.kind, reason)
        return media.model_copy(update={"missing": reason})
