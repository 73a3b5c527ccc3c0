"""The one cipher of WeChat's CDN: AES-128 in ECB mode with PKCS#7 padding, both ways.

Files a learner sends arrive encrypted this way (:mod:`channels.weixin.ilink.media`
opens them); files the partner sends are encrypted this way before the upload
(:mod:`channels.weixin.ilink.upload`), each under a fresh random key.  ECB is
the platform's choice, not ours: the key is per file and travels inside the
message, so the mode's weakness (equal blocks look equal) stays within one file.

A key reaches us in one of the platform's spellings (:func:`media_key`) and
leaves in the one its own client writes (:func:`key_text`): base64 of the
key's 32 hex digits.
"""

from __future__ import annotations

import base64
import binascii
import secrets

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from channels.weixin.ilink.transport import PLATFORM
from gateway.core.errors import BadRequest

BLOCK = 16
"""AES's block, and the key's length (AES-128), in bytes."""


def fresh_key() -> bytes:
    """A new random key for one upload."""
    return secrets.token_bytes(BLOCK)


def padded_size(size: int) -> int:
    """The ciphertext's length for ``size`` plaintext bytes: PKCS#7 always adds 1 to 16 bytes."""
    return (size // BLOCK + 1) * BLOCK


def encrypt(data: bytes, key: bytes) -> bytes:
    """``data`` padded and sealed under ``key``, as the CDN keeps it."""
    pad = padding.PKCS7(BLOCK * 8).padder()
    seal = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return seal.update(pad.update(data) + pad.finalize()) + seal.finalize()


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


def key_text(key: bytes) -> str:
    """The key as a message's ``media.aes_key`` carries it: base64 of its hex digits."""
    return base64.b64encode(key.hex().encode("ascii")).decode("ascii")


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
