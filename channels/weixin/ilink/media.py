"""Inbound files from WeChat's CDN: a download of encrypted bytes, opened with the key the message carried.

An image or file in a message is not a URL: its ``media`` names an
``encrypt_query_param`` (what the CDN's ``download`` endpoint takes) and an
``aes_key``.  The CDN serves the file encrypted with AES-128 in ECB mode,
PKCS#7-padded; the key arrives base64-encoded, either as the 16 key bytes
themselves or as their 32 hex digits (images carry a hex ``aeskey`` of their
own, which wins).  The decoder keeps both in the :class:`MediaRef` locator; the
pipeline fetches after the ack (ADR 0026) through :func:`fetch`, which reads
the encrypted body within the limit (plus one block of padding), decrypts it
and hands it on whole -- ECB has no stream to speak of worth the code, and the
limit bounds it.  The cipher is :mod:`channels.weixin.ilink.cipher`'s, the
same one the uploads of outbound files seal with.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote

import httpx

from channels._kit.media import download
from channels.weixin.ilink.cipher import BLOCK, decrypt, media_key
from channels.weixin.ilink.transport import PLATFORM
from gateway.core.channel import MediaStream
from gateway.core.errors import TooLarge
from gateway.core.messages import MediaRef


def locator(param: str, key: str) -> str:
    """The :attr:`MediaRef.locator` for a CDN file: where it is and the key that opens it."""
    return json.dumps({"param": param, "key": key})


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data


@asynccontextmanager
async def fetch(http: httpx.AsyncClient, cdn_base: str, ref: MediaRef, *, limit: int) -> AsyncIterator[MediaStream]:
    where = json.loads(ref.locator)
    key = media_key(str(where["key"]))
    url = f"{cdn_base}download?encrypted_query_param={quote(str(where['param']), safe='')}"
    async with download(http, url, limit=limit + BLOCK, platform=PLATFORM, declared_type=ref.mime_type,
                        name=ref.name) as stream:
        data = b"".join([chunk async for chunk in stream.chunks])
        plain = decrypt(data, key)
        if len(plain) > limit:
            raise TooLarge(PLATFORM, limit, len(plain))
        yield MediaStream(chunks=_once(plain), content_type=ref.mime_type or stream.content_type,
                          name=ref.name or stream.name)
