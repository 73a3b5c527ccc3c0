"""Media both ways: streamed mxc:// downloads after the ack, and uploads of reply attachments.

Inbound files are fetched by the pipeline once the sync that brought them is
durable and its token stored (``MatrixChannel.fetch_media``), through the
authenticated media API (``/_matrix/client/v1/media/download``) with the kit's
streamed, size-limited download: nio's own download reads the whole body into
memory first, whatever its size.  Encrypted files (``content.file``) never get
here: events of encrypted rooms are refused before decoding (ADR 0012).

Outbound, a file given by path is uploaded and posted by its mxc:// URL; an
mxc:// URL is posted as it is.  An http(s) URL is *not* fetched by the
gateway: the URL comes from model output, and fetching whatever it names from
inside a school's network is a server-side request forgery waiting to happen.
It is posted as a link in the media event instead (see ADR 0012).
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from nio import AsyncClient

from channels._kit.media import download
from channels.base import MediaStream
from channels.matrix.transport import call
from gateway.core.errors import BadRequest
from gateway.core.messages import Attachment, MediaRef

log = logging.getLogger(__name__)


MXC = re.compile(r"mxc://(?P<server>(?:[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?)/(?P<media>[A-Za-z0-9_\-]+)")
"""A content URI: server name and media id, with only the characters the spec allows (no path tricks)."""


def download_url(homeserver: str, mxc: str) -> str:
    """The authenticated media endpoint for ``mxc``; BadRequest when the sender's URL is not one."""
    match = MXC.fullmatch(mxc)
    if match is None:
        raise BadRequest("matrix", f"unreadable mxc URL {mxc[:100]!r}")
    return f"{homeserver.rstrip('/')}/_matrix/client/v1/media/download/{match['server']}/{match['media']}"


@asynccontextmanager
async def fetch(http: httpx.AsyncClient, homeserver: str, token: str, ref: MediaRef, *,
                limit: int) -> AsyncIterator[MediaStream]:
    """Stream an inbound file from the homeserver, within ``limit``, with the bot's access token."""
    async with download(http, download_url(homeserver, ref.locator), limit=limit, platform="matrix",
                        headers={"Authorization": f"Bearer {token}"}, declared_type=ref.mime_type,
                        name=ref.name) as stream:
        yield stream


async def upload(client: AsyncClient, attachment: Attachment) -> tuple[str, int | None]:
    """The URL to post an outbound attachment by (mxc:// after an upload, or a link), and its size.

    Its size was checked against ``media_max_bytes`` by the outbound path (``gateway.pipeline.budget``),
    which sends a file over it by name or link instead: this checks nothing again."""
    if attachment.path:
        path = Path(attachment.path)
        data = await asyncio.to_thread(path.read_bytes)
        mime = attachment.mime_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        response, _keys = await call("upload", client.upload(
            lambda _got_429, _got_timeouts: data, content_type=mime, filename=attachment.name or path.name,
            filesize=len(data),
        ))
        return response.content_uri, len(data)
    if attachment.url:
        return attachment.url, None
    raise BadRequest("matrix", "attachment has neither a path nor a URL")
