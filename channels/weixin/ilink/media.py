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
limit bounds it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote

import httpx
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from channels._kit.media import download
from channels.weixin.ilink.transport import PLATFORM
from gateway.core.channel import MediaStream
from gateway.core.errors import BadRequest, TooLarge
from gateway.core.messages import MediaRef

BLOCK = 16


def locator(param: str, key: str) -> str:
    """The :attr:`MediaRef.locator` for a CDN file: where it is and the key that opens it."""
    return json.dumps({"param": param, "key": key})


def media_key(text: str) -> bytes:
    """The 16 key bytes from what a message carries: hex digits, or base64 of the bytes or of their hex."""
    candidates = [text]
    try:
        candidates.append(base64.b64decode(text, validate=True).decode("ascii"))
        raw = base64.b64decode(text, validate=True)
        if len(raw) == BLOCK:
            return raw
    except (binascii.Error, ValueError, UnicodeDecodeError):
        pass
    for candidate in candidates:
        try:
            key = bytes.fromhex(candidate)
        except ValueError:
            continue
        if len(key) == BLOCK:
            return key
    raise BadRequest(PLATFORM, "the file's aes_key is not a 16-byte key")


def decrypt(data: bytes, key: bytes) -> bytes:
    """AES-128-ECB, PKCS#7 padding removed; a body that does not open is the platform's fault, said so."""
    if len(data) % BLOCK:
        raise BadRequest(PLATFORM, "the CDN's file is not whole AES blocks")
    opened = Cipher(algorithms.AES(key), modes.ECB()).decryptor()
    padded = opened.update(data) + opened.finalize()
    try:
        unpad = padding.PKCS7(BLOCK * 8).unpadder()
        return unpad.update(padded) + unpad.finalize()
    except ValueError:
        raise BadRequest(PLATFORM, "the CDN's file does not open with its key") from None


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
