"""Outbound files to WeChat's CDN: ask where, seal under a fresh key, upload, and name the result in a message.

A file in a bot message is not a URL either (the inbound side is
:mod:`channels.weixin.ilink.media`): the bot asks ``ilink/bot/getuploadurl``
for an upload parameter for one file -- its plaintext size and MD5, the
ciphertext's size, the key as hex, the learner it is for, and its media type
(1 image, 2 video, 3 file) -- encrypts the bytes under a fresh random key
(:mod:`channels.weixin.ilink.cipher`), and POSTs the ciphertext to the CDN's
``upload`` endpoint (``upload_full_url`` when the API gives one, else
``<cdn>/upload?encrypted_query_param=<upload_param>&filekey=<filekey>``).  The
CDN answers with the file's download parameter in the ``x-encrypted-param``
header; the message's ``media`` carries it with the key (base64 of its hex).

Translation of the CDN's answer, once, here::

    429                                   -> RateLimited
    5xx, a socket that fails, no header   -> PeerUnavailable (the outbound path retries the whole part)
    any other 4xx                         -> BadRequest (the upload parameter or the file is refused)

No retry here: the outbound path retries a transient part, and a retried part
asks for a new upload under a new key -- nothing was sent, so nothing goes twice.
The upload parameters are the platform's credentials for one file: never logged.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ConfigDict

from channels._kit.http_errors import ErrorKind, translate
from channels.weixin.ilink.cipher import encrypt, fresh_key, key_text, padded_size
from channels.weixin.ilink.transport import PLATFORM, IlinkApi
from gateway.core.errors import PeerUnavailable
from gateway.core.messages import MediaKind

log = logging.getLogger(__name__)
UPLOAD_TYPE = {"image": 1, "video": 2, "file": 3}
"""``getuploadurl``'s ``media_type`` per kind this channel sends natively."""
ITEM_TYPE = {"image": 2, "file": 4, "video": 5}
"""``item_list`` ``type`` per kind (3, voice, wants SILK-encoded audio: audio goes as a file)."""
CDN_OVERRIDES = {401: ErrorKind.BAD_REQUEST, 403: ErrorKind.BAD_REQUEST}
"""The CDN's 401/403 refuses one upload's parameter, never the account's login."""


def sent_as(kind: MediaKind) -> str:
    """The kind a file goes as: images and videos as themselves, audio and anything else as a file."""
    return kind if kind in ("image", "video") else "file"


class UploadAsk(BaseModel):
    """The body of ``getuploadurl`` for one file (no thumbnail: ``no_need_thumb``)."""

    model_config = ConfigDict(frozen=True)
    filekey: str
    media_type: int
    to_user_id: str
    rawsize: int
    rawfilemd5: str
    filesize: int
    no_need_thumb: bool = True
    aeskey: str


class UploadPlace(BaseModel):
    """What ``getuploadurl`` answers: the full upload URL, or the parameter to build it from."""

    model_config = ConfigDict(extra="ignore")
    upload_param: str = ""
    upload_full_url: str = ""


@dataclass(frozen=True)
class Uploaded:
    """A file on the CDN: its download parameter, the key that opens it, and its two sizes."""

    param: str
    key: bytes
    size: int
    sealed_size: int


async def upload(api: IlinkApi, http: httpx.AsyncClient, cdn_base: str, *, to: str, data: bytes,
                 kind: str) -> Uploaded:
    """Put ``data`` on the CDN for ``to`` as ``kind`` (``image``, ``video`` or ``file``)."""
    key, filekey = fresh_key(), secrets.token_hex(16)
    ask = UploadAsk(filekey=filekey, media_type=UPLOAD_TYPE[kind], to_user_id=to, rawsize=len(data),
                    rawfilemd5=hashlib.md5(data, usedforsecurity=False).hexdigest(),
                    filesize=padded_size(len(data)), aeskey=key.hex())
    place = UploadPlace.model_validate(await api.upload_url(ask.model_dump()))
    if place.upload_full_url.strip():
        url = place.upload_full_url.strip()
    elif place.upload_param:
        url = f"{cdn_base}upload?encrypted_query_param={quote(place.upload_param, safe='')}&filekey={filekey}"
    else:
        raise PeerUnavailable(PLATFORM, "ilink/bot/getuploadurl: the answer names no upload place")
    sealed = encrypt(data, key)
    param = await _post(http, url, sealed)
    log.debug("weixin ilink uploaded kind=%s bytes=%d", kind, len(data))
    return Uploaded(param=param, key=key, size=len(data), sealed_size=len(sealed))


async def _post(http: httpx.AsyncClient, url: str, sealed: bytes) -> str:
    """The ciphertext to the CDN; its download parameter.  The URL carries the upload's credential: never said."""
    try:
        response = await http.post(url, content=sealed, headers={"Content-Type": "application/octet-stream"})
    except httpx.HTTPError as error:
        raise PeerUnavailable(PLATFORM, f"CDN upload failed ({type(error).__name__})") from None
    said = response.headers.get("x-error-message", "")
    failed = translate(PLATFORM, "CDN upload" + (f" ({said[:100]})" if said else ""), response.status_code,
                       response.headers, overrides=CDN_OVERRIDES)
    if failed is not None:
        raise failed
    param = response.headers.get("x-encrypted-param", "")
    if not param:
        raise PeerUnavailable(PLATFORM, "CDN upload: the answer has no x-encrypted-param")
    return param


def item(kind: str, uploaded: Uploaded, *, name: str) -> dict[str, Any]:
    """The ``item_list`` entry that shows an uploaded file: its ``media`` names the CDN place and the key."""
    media = {"encrypt_query_param": uploaded.param, "aes_key": key_text(uploaded.key), "encrypt_type": 1}
    if kind == "image":
        return {"type": ITEM_TYPE[kind], "image_item": {"media": media, "mid_size": uploaded.sealed_size}}
    if kind == "video":
        return {"type": ITEM_TYPE[kind], "video_item": {"media": media, "video_size": uploaded.sealed_size}}
    return {"type": ITEM_TYPE["file"], "file_item": {"media": media, "file_name": name, "len": str(uploaded.size)}}
