"""File downloads every channel shares: streamed, size-limited, with names safe to keep.

A channel's ``fetch_media`` resolves its platform reference to a URL (Telegram's
getFile, Matrix's media endpoint, Slack's ``url_private``) and hands it to
:func:`download`, which yields a :class:`~channels.base.MediaStream` that stops
at the limit: a ``Content-Length`` over it fails before a byte is read, and a
body that runs past it -- the header lied, or there was none -- fails the moment
it does, so a peer cannot fill the disk by understating a size.

The learner names their files, so a name is cleaned before anything keeps it
(:func:`safe_name`): no path separators, no dot-files, no control characters,
NFC-normalized so the same name typed on two systems is one name, and bounded
in UTF-8 bytes because file systems cap names at 255 bytes, not characters.

Some platforms answer a download that failed with status 200 and a JSON error
body (WeCom's and WeChat's ``media/get``: ``{"errcode": 40007}``).  Given the
platform's :class:`~channels._kit.http_errors.BodyCodes`, :func:`download`
reads a body whose type says JSON or text (within the limit) and raises what
its code means, so an expired ``media_id`` is ``BadRequest`` and a stale token
``AuthFailed`` -- never an "image" of forty bytes of JSON.

Outbound, a platform that takes files only as uploaded bytes (WeChat's CDN) needs
the whole file the brain attached, whether it names a local path or a URL:
:func:`read_attachment` reads either within the platform's limit, with its name
and type, so no channel writes that twice.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import re
import unicodedata
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from email.message import Message
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urlsplit

import httpx

from channels._kit.http_errors import BodyCodes, json_body, translate
from gateway.core.channel import MediaStream
from gateway.core.errors import AuthFailed, BadRequest, NotFound, PeerUnavailable, PermanentError, RateLimited, TooLarge
from gateway.core.messages import Attachment, MediaKind

log = logging.getLogger(__name__)

NAME_BYTES = 200
"""Longest name kept, in UTF-8 bytes (file systems allow 255; room is left for a prefix)."""
SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\:*?\"<>|]+")


ERROR_BODY_TYPES = frozenset({"application/json", "text/json", "text/plain"})
"""The types a platform's JSON error answer comes as, with status 200 (WeCom says ``text/plain`` at times)."""

KINDS_OF_THEIR_OWN: Mapping[str, MediaKind] = {"image": "image", "audio": "audio", "video": "video"}
"""MIME major types that are a media kind of their own; anything else (or no type) is a file."""


def media_kind(content_type: str | None) -> MediaKind:
    """The media kind a MIME type says (``image/png`` is an image, ``application/pdf`` a file)."""
    return KINDS_OF_THEIR_OWN.get((content_type or "").split("/", 1)[0].strip().lower(), "file")


_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"), (b"%PDF-", "application/pdf"),
)


def sniffed_type(data: bytes, declared: str = "", name: str = "") -> str:
    """The type of bytes whose server says nothing useful about them (an encrypted file's CDN says
    ``application/octet-stream``): the platform's declared type, else the file's own signature (PNG, JPEG,
    GIF, WebP, PDF), else a guess from its name."""
    if declared:
        return declared
    for magic, mime in _SIGNATURES:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return content_type(None, name=name)


def safe_name(name: str, *, fallback: str = "file") -> str:
    """A file name that is only a name: the last path segment, cleaned, never hidden, never empty."""
    name = unicodedata.normalize("NFC", name or "")
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if unicodedata.category(ch) not in {"Cc", "Cf", "Cs", "Zl", "Zp"})
    name = _UNSAFE.sub("_", name).strip(" .")
    stem, suffix = _split(name)
    room = NAME_BYTES - len(suffix.encode())
    stem = stem.encode()[:room].decode("utf-8", "ignore").rstrip(" .")
    return (stem + suffix) if stem else fallback + suffix


def _split(name: str) -> tuple[str, str]:
    suffix = suffix_of(name)
    return (name[: -len(suffix)], suffix) if suffix else (name, "")


def suffix_of(name: str) -> str:
    """The name's extension when it surely is one (".jpg"), else empty: "notes." + 300 x's has none."""
    suffix = PurePosixPath(name or "").suffix
    return suffix.lower() if SUFFIX.fullmatch(suffix) else ""


def content_type(header: str | None, *, declared: str = "", name: str = "") -> str:
    """The file's type: the server's header unless it only says "bytes", else the platform's declared
    type, else a guess from the name; ``application/octet-stream`` when nothing says more."""
    given = (header or "").split(";", 1)[0].strip().lower()
    if given and given != "application/octet-stream":
        return given
    return declared or mimetypes.guess_type(name)[0] or "application/octet-stream"


def attachment_name(disposition: str | None) -> str:
    """The file name a ``Content-Disposition`` header gives (RFC 6266, ``filename*`` included), or ""."""
    if not disposition:
        return ""
    message = Message()
    message["content-disposition"] = disposition
    return message.get_filename() or ""


async def limited(chunks: AsyncIterator[bytes], limit: int, *, platform: str) -> AsyncIterator[bytes]:
    """The chunks, failing with :class:`TooLarge` once more than ``limit`` bytes came."""
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise TooLarge(platform, limit)
        yield chunk


def _check(platform: str, response: httpx.Response) -> None:
    status = response.status_code
    if status < 400:
        return
    what = f"file download answered HTTP {status}"
    if status == 429:
        raise RateLimited(platform, float(response.headers.get("Retry-After", "1") or 1), code=status)
    if status in (401, 403):
        raise AuthFailed(platform, what, code=status)
    if status == 404:
        raise NotFound(platform, what, code=status)
    if status >= 500:
        raise PeerUnavailable(platform, what, code=status)
    raise PermanentError(platform, what, code=status)


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def _unless_refused(chunks: AsyncIterator[bytes], platform: str, response: httpx.Response,
                          codes: BodyCodes) -> AsyncIterator[bytes]:
    """Read a JSON-or-text body whole: raise the error its code means, else hand it on as the file."""
    body = b"".join([chunk async for chunk in chunks])
    failed = translate(platform, "file download", response.status_code, response.headers, json_body(body), codes=codes)
    if failed is not None:
        raise failed
    return _once(body)


@asynccontextmanager
async def download(client: httpx.AsyncClient, url: str, *, limit: int, platform: str,
                   headers: Mapping[str, str] | None = None, declared_type: str = "",
                   name: str = "", codes: BodyCodes | None = None) -> AsyncIterator[MediaStream]:
    """Stream ``url`` within ``limit`` bytes.  The URL and headers may hold a token: never logged.

    Transport failures become :class:`PeerUnavailable`; an HTTP error its class in the error tree; with
    ``codes``, a JSON body carrying one of the platform's error codes the error it means."""
    try:
        async with client.stream("GET", url, headers=headers) as response:
            _check(platform, response)
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > limit:
                raise TooLarge(platform, limit, int(length))
            given = attachment_name(response.headers.get("Content-Disposition")) or name
            chunks = limited(response.aiter_bytes(), limit, platform=platform)  # as they arrive, not re-chunked
            said_type = (response.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
            if codes is not None and said_type in ERROR_BODY_TYPES:
                chunks = await _unless_refused(chunks, platform, response, codes)
            yield MediaStream(
                chunks=chunks,
                content_type=content_type(response.headers.get("Content-Type"), declared=declared_type, name=given),
                name=safe_name(given) if given else "",
            )
    except httpx.HTTPError as error:  # the URL may carry a token: name the failure's kind, never the URL
        raise PeerUnavailable(platform, f"file download failed ({type(error).__name__})") from None


@dataclass(frozen=True)
class AttachmentBytes:
    """An outbound file in hand: its bytes, the name to show and its type."""

    data: bytes
    name: str
    content_type: str


def _read_file(path: Path, limit: int, platform: str) -> bytes:
    try:
        size = path.stat().st_size
        if size > limit:
            raise TooLarge(platform, limit, size)
        return path.read_bytes()
    except OSError as error:
        raise BadRequest(platform, f"attachment {path.name} cannot be read: {error.strerror}") from None


async def read_attachment(client: httpx.AsyncClient, attachment: Attachment, *, limit: int, platform: str) -> AttachmentBytes:
    """The whole file ``attachment`` names (a local path first, else its URL), within ``limit`` bytes.

    A file over the limit is :class:`TooLarge` (by its size on disk, or as the download passes the
    limit); a file that cannot be read is :class:`BadRequest`; a URL that fails is its class in the
    error tree, as :func:`download` says -- so a 5xx is transient and the outbound path retries."""
    if attachment.path:
        path = Path(attachment.path)
        data = await asyncio.to_thread(_read_file, path, limit, platform)  # up to the limit from disk: off the loop
        name = safe_name(attachment.name or path.name)
        return AttachmentBytes(data, name, content_type(None, declared=attachment.mime_type, name=name))
    if attachment.url:
        given = attachment.name or unquote(urlsplit(attachment.url).path.rsplit("/", 1)[-1])
        async with download(client, attachment.url, limit=limit, platform=platform, declared_type=attachment.mime_type,
                            name=given) as stream:
            data = b"".join([chunk async for chunk in stream.chunks])
            name = safe_name(attachment.name) if attachment.name else stream.name or safe_name(given)
            return AttachmentBytes(data, name, stream.content_type)
    raise BadRequest(platform, "attachment has neither a path nor a URL")
