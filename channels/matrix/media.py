"""Media both ways: mxc:// downloads into the data dir, and uploads of reply attachments.

Inbound files are fetched through the authenticated media API
(``/_matrix/client/v1/media/download``) and written under
``<data_dir>/matrix/<account>/media/``, named by a hash of the event id, so a
re-synced event finds its file instead of fetching it twice.  A file larger
than ``media_max_bytes`` -- by its declared size, or by what arrived -- is not
kept; the message still goes through, its media element without a local file.

Outbound, a file given by path is uploaded and posted by its mxc:// URL; an
mxc:// URL is posted as it is.  An http(s) URL is *not* fetched by the
gateway: the URL comes from model output, and fetching whatever it names from
inside a school's network is a server-side request forgery waiting to happen.
It is posted as a link in the media event instead (see ADR 0012).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import mimetypes
import re
from pathlib import Path

from nio import AsyncClient

from channels.matrix.transport import call
from gateway.core.errors import BadRequest, GatewayError
from gateway.core.messages import Attachment

log = logging.getLogger(__name__)
SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}")


def media_dir(data_dir: Path, account: str) -> Path:
    return data_dir / "matrix" / account / "media"


async def download(client: AsyncClient, mxc: str, *, event_id: str, folder: Path, max_bytes: int,
                   declared: int | None) -> Path | None:
    """The local copy of an inbound file, or None (too big, or the server would not hand it out)."""
    if declared is not None and declared > max_bytes:
        log.info("media not fetched event=%s reason=declared size %d > limit %d", event_id, declared, max_bytes)
        return None
    stem = hashlib.blake2b(event_id.encode(), digest_size=10).hexdigest()
    kept = await asyncio.to_thread(_kept, folder, stem)  # a scan of the whole media folder: off the event loop
    if kept is not None:
        return kept
    try:
        response = await call("download", client.download(mxc=mxc))
    except GatewayError as error:
        log.warning("media not fetched event=%s mxc=%s reason=%s", event_id, mxc, error)
        return None
    except ValueError as error:  # nio splits the URL with urlparse, which raises on "mxc://[x/y": the sender's
        # bad URL, and raised out of the sync loop it would stop the account on this event forever
        log.warning("media not fetched event=%s mxc=%r reason=unreadable mxc URL: %s", event_id, mxc, error)
        return None
    body: bytes = response.body
    if len(body) > max_bytes:
        log.info("media not kept event=%s reason=%d bytes > limit %d", event_id, len(body), max_bytes)
        return None
    suffix = Path(response.filename or "").suffix
    if not SUFFIX.fullmatch(suffix):  # the serving homeserver's word: only what is surely a file name's tail
        suffix = mimetypes.guess_extension(response.content_type or "") or ""
    path = folder / f"{stem}{suffix}"
    await asyncio.to_thread(_save, path, body)
    return path


def _kept(folder: Path, stem: str) -> Path | None:
    """The file an earlier fetch of this event left; a ".part" is what a crash mid-write left behind: not
    the file, fetch it again."""
    existing = sorted(p for p in folder.glob(f"{stem}*") if p.suffix != ".part") if folder.exists() else []
    return existing[0] if existing else None


def _save(path: Path, body: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    partial.write_bytes(body)
    partial.replace(path)  # a crash mid-write leaves a .part, never a truncated file under the real name


async def upload(client: AsyncClient, attachment: Attachment, *, max_bytes: int) -> tuple[str, int | None]:
    """The URL to post an outbound attachment by (mxc:// after an upload, or a link), and its size."""
    if attachment.path:
        path = Path(attachment.path)
        data = await asyncio.to_thread(path.read_bytes)
        if len(data) > max_bytes:
            raise BadRequest("matrix", f"attachment {path.name} is {len(data)} bytes, over the {max_bytes} limit")
        mime = attachment.mime_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        response, _keys = await call("upload", client.upload(
            lambda _got_429, _got_timeouts: data, content_type=mime, filename=attachment.name or path.name,
            filesize=len(data),
        ))
        return response.content_uri, len(data)
    if attachment.url:
        return attachment.url, None
    raise BadRequest("matrix", "attachment has neither a path nor a URL")
