"""Blob collection: inbound files go once no stored message needs them, and with a forgotten learner.

The blob store keeps fetched files by content hash (:mod:`gateway.blobs`) and never removes one on its
own.  A file is needed while a stored inbound message that carries it is still pending or held (its turn
has yet to read it), and for ``pipeline.blob_retention_s`` after that: a blob goes once no message received
within the retention refers to it *and* it was last stored longer ago than that.  The second half covers
what the store no longer shows -- inbox rows pruned after their platform's redelivery horizon -- and the
moment between a fetch and the record of it, when a new blob has no row yet.  The gateway runs
:meth:`BlobCollector.collect` from its housekeeping loop, hourly, right after the store's prune.

``/forget`` (``brain.memory.controls``) hands the learner's identities to :meth:`BlobCollector.forget`:
their stored messages lose their files (a note says they were erased, so nothing fetches them again) and
the files go at once, unless another sender's message carries the very same bytes.  A crash between the
two leaves the files to :meth:`collect`, once the retention is past.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from brain.memory.scopes import Identity
from gateway.blobs import LocalBlobs
from gateway.store import InboxStore

log = logging.getLogger(__name__)

ERASED = "erased at the sender's request"


class BlobCollector:
    def __init__(self, store: InboxStore, blobs: LocalBlobs, retention_s: float, *, clock: Callable[[], float] = time.time) -> None:
        self.store, self.blobs, self.retention_s, self._clock = store, blobs, retention_s, clock

    async def collect(self) -> int:
        """Remove every blob nothing needs any more (see the module docstring); return how many went."""
        cutoff = self._clock() - self.retention_s
        keep = await self.store.blobs_in_use(received_before=cutoff)
        removed = await self.blobs.sweep(keep, stored_before=cutoff)
        if removed:
            log.info("blobs collected removed=%d kept_in_use=%d", removed, len(keep))
        return removed

    async def forget(self, senders: Sequence[Identity]) -> int:
        """Erase the files these identities sent: out of their stored messages, then off the disk."""
        sent: set[str] = set()
        for who in senders:
            sent |= await self.store.erase_sender_files(who.channel, who.account, who.user, ERASED)
        shared = await self.store.blobs_in_use(received_before=0.0)  # every stored message that still has files
        removed = 0
        for key in sorted(sent - shared):
            removed += await self.blobs.delete(key)
        log.info("sender files erased identities=%d files=%d kept_shared=%d", len(senders), removed, len(sent & shared))
        return removed
