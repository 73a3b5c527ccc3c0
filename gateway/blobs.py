"""The blob store: where inbound files live once fetched, by the hash of their bytes.

A fetched file is kept under a content-addressed key (``<sha256>.<ext>``), so
fetching the same file again -- a restart between the fetch and the record of
it, the same photo sent twice -- stores it once, and a key names nothing the
sender chose: no path, no name, nothing to traverse with.  Writes go to a
temporary file first and are renamed into place, so a crash never leaves a
truncated file under a real key; the limit is counted again here, whatever the
channel counted.

:class:`~gateway.core.channel.BlobStore` is the seam: :class:`LocalBlobs` keeps a folder under the
data dir, which one machine can read; object storage (S3 and the like) is the
next implementation behind the same three methods, and ``url`` is where
``file://`` gives way to a URL every node can read.

Nothing a channel does removes a blob: :meth:`LocalBlobs.sweep` and
:meth:`LocalBlobs.delete` are for :mod:`gateway.blob_gc`, which knows from the
store which blobs stored messages still need.  A blob's age is the time it was
last stored (its file's modification time): storing the same bytes again starts
it over, so a file sent again is never swept between its fetch and the record
of it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
import uuid
from collections.abc import AsyncIterable, Container
from pathlib import Path
from typing import IO

from gateway.core.channel import Blob, BlobStore
from gateway.core.errors import TooLarge

__all__ = ["Blob", "BlobStore", "LocalBlobs"]

log = logging.getLogger(__name__)

KEY = re.compile(r"[0-9a-f]{64}(\.[a-z0-9]{1,10})?")
SUFFIX = re.compile(r"\.[a-z0-9]{1,10}")
WHO = "blob store"


def check_key(key: str) -> str:
    if not KEY.fullmatch(key):
        raise KeyError(f"not a blob key: {key[:80]!r}")
    return key


class LocalBlobs:
    """Blobs in a folder: ``<root>/<first two hex digits>/<key>``, temporary files in ``<root>/tmp``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: str) -> Path:
        check_key(key)
        return self.root / key[:2] / key

    async def put(self, chunks: AsyncIterable[bytes], *, limit: int, suffix: str = "") -> Blob:
        suffix = suffix.lower() if SUFFIX.fullmatch(suffix.lower()) else ""
        partial = self.root / "tmp" / f"{uuid.uuid4().hex}.part"
        handle = await asyncio.to_thread(_open, partial)
        digest, size = hashlib.sha256(), 0
        try:
            async for chunk in chunks:
                size += len(chunk)
                if size > limit:
                    raise TooLarge(WHO, limit)
                digest.update(chunk)
                await asyncio.to_thread(handle.write, chunk)
            await asyncio.to_thread(handle.close)
            key = digest.hexdigest() + suffix
            await asyncio.to_thread(_place, partial, self.path(key))
        except BaseException:
            await asyncio.to_thread(_discard, handle, partial)
            raise
        log.debug("blob stored key=%s bytes=%d", key, size)
        return Blob(key=key, size=size)

    async def get(self, key: str) -> bytes:
        path = self.path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise KeyError(key) from None

    def url(self, key: str) -> str:
        return self.path(key).resolve().as_uri()

    async def delete(self, key: str) -> bool:
        """Remove the blob; False when there was none."""
        path = self.path(key)
        try:
            await asyncio.to_thread(path.unlink)
        except FileNotFoundError:
            return False
        log.debug("blob removed key=%s", key)
        return True

    async def sweep(self, keep: Container[str], stored_before: float) -> int:
        """Remove every blob not in ``keep`` last stored before ``stored_before`` (a ``time.time()``), and
        temporary files a crash left behind as long ago; return how many blobs went."""
        return await asyncio.to_thread(_sweep, self.root, keep, stored_before)


def _open(path: Path) -> IO[bytes]:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("wb")


def _place(partial: Path, final: Path) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():  # the same bytes were kept before: keep that copy, stored again as of now
        partial.unlink(missing_ok=True)
        os.utime(final)
    else:
        partial.replace(final)


def _sweep(root: Path, keep: Container[str], stored_before: float) -> int:
    removed = 0
    for path in root.glob("*/*"):
        if path.parent.name == "tmp":
            if _older(path, stored_before):
                path.unlink(missing_ok=True)
            continue
        if KEY.fullmatch(path.name) and path.name not in keep and _older(path, stored_before):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def _older(path: Path, than: float) -> bool:
    try:
        return path.stat().st_mtime < than
    except FileNotFoundError:
        return False


def _discard(handle: IO[bytes], partial: Path) -> None:
    handle.close()
    partial.unlink(missing_ok=True)
