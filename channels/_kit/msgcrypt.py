"""AES-CBC message encryption as WeChat, WeCom and Feishu use it.

**WeChat / WeCom** (X2, W2).  The teacher copies a 43-character
*EncodingAESKey*; Base64-decoding it with one ``=`` appended gives the 32-byte
AES-256 key, and the IV is its first 16 bytes.  The plaintext is 16 random
bytes, the message's length as 4 bytes in network order, the message, and the
*receive id* (the official account's appid, or WeCom's corpid / bot id),
PKCS#7-padded to 32-byte blocks; the ciphertext travels Base64-encoded.  A
message that decrypts but names another receive id was meant for another app
and is refused.

**WeCom AI-bot files** (W3).  An image or file an AI bot is sent is stored
encrypted, and its message carries a key of its own (``aeskey``, Base64 of 32
bytes, its ``=`` padding sometimes left off): AES-256-CBC, the IV the key's first
16 bytes, PKCS#7 to 32-byte blocks like the messages -- but no random prefix,
length or receive id around the bytes (:func:`decrypt_file`).

**Feishu** (F5).  With an *Encrypt Key* set, every event arrives as
``{"encrypt": "<base64>"}``: the key is SHA-256 of the Encrypt Key, the first
16 decoded bytes are the IV, the rest AES-256-CBC with PKCS#7 (16-byte
blocks) around the event's JSON.

A ciphertext that does not decrypt under the account's key is refused as
:class:`~gateway.errors.ForgedRequest` (``malformed``), never a traceback.
The encrypting halves exist for WeChat's encrypted replies and for the peers
in ``tests/peers/`` that play the platforms.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import struct

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from gateway.core.errors import ForgedRequest

ENCODING_AES_KEY_CHARS = 43
_WECHAT_BLOCK_BITS = 256  # WeChat pads to 32 bytes, not AES's 16


def _cbc(key: bytes, iv: bytes) -> Cipher[modes.CBC]:
    return Cipher(algorithms.AES(key), modes.CBC(iv))


def _unbase64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ForgedRequest("the ciphertext is not Base64", reason="malformed") from None


def _decrypt(key: bytes, iv: bytes, data: bytes, block_bits: int) -> bytes:
    if not data or len(data) % 16:
        raise ForgedRequest("the ciphertext is not whole AES blocks", reason="malformed")
    decryptor = _cbc(key, iv).decryptor()
    padded = decryptor.update(data) + decryptor.finalize()
    unpadder = padding.PKCS7(block_bits).unpadder()
    try:
        return unpadder.update(padded) + unpadder.finalize()
    except ValueError:  # the padding a wrong key leaves behind
        raise ForgedRequest("the ciphertext does not decrypt under this account's key", reason="malformed") from None


def _encrypt(key: bytes, iv: bytes, plain: bytes, block_bits: int) -> bytes:
    padder = padding.PKCS7(block_bits).padder()
    encryptor = _cbc(key, iv).encryptor()
    return encryptor.update(padder.update(plain) + padder.finalize()) + encryptor.finalize()


class WechatCrypto:
    """One account's EncodingAESKey and receive id (appid or corpid)."""

    def __init__(self, encoding_aes_key: str, receive_id: str) -> None:
        if len(encoding_aes_key) != ENCODING_AES_KEY_CHARS:
            raise ValueError(f"an EncodingAESKey is {ENCODING_AES_KEY_CHARS} characters")
        try:
            self._key = base64.b64decode(encoding_aes_key + "=", validate=True)
        except (binascii.Error, ValueError) as error:
            raise ValueError("an EncodingAESKey is Base64 letters and digits") from error
        self.receive_id = receive_id

    def encrypt(self, message: bytes | str, *, random16: bytes | None = None) -> str:
        """The Base64 ciphertext of ``message`` for this receive id (``random16`` fixed only in tests)."""
        body = message.encode() if isinstance(message, str) else message
        lead = random16 if random16 is not None else os.urandom(16)
        plain = lead + struct.pack(">I", len(body)) + body + self.receive_id.encode()
        return base64.b64encode(_encrypt(self._key, self._key[:16], plain, _WECHAT_BLOCK_BITS)).decode()

    def decrypt(self, encrypted: str) -> bytes:
        """The message inside ``encrypted``; ``ForgedRequest`` if it is not for this key and receive id."""
        plain = _decrypt(self._key, self._key[:16], _unbase64(encrypted), _WECHAT_BLOCK_BITS)
        if len(plain) < 20:
            raise ForgedRequest("the decrypted message is too short to hold its length", reason="malformed")
        (length,) = struct.unpack(">I", plain[16:20])
        message, receive_id = plain[20 : 20 + length], plain[20 + length :]
        if len(message) != length:
            raise ForgedRequest("the decrypted message is shorter than its length says", reason="malformed")
        if receive_id != self.receive_id.encode():
            raise ForgedRequest("the message is addressed to another app id", reason="bad_signature")
        return message


def _file_key(aeskey: str) -> bytes:
    try:
        key = base64.b64decode(aeskey + "=" * (-len(aeskey) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ForgedRequest("the file's key is not Base64", reason="malformed") from None
    if len(key) != 32:
        raise ForgedRequest("the file's key is not an AES-256 key", reason="malformed")
    return key


def decrypt_file(aeskey: str, data: bytes) -> bytes:
    """The bytes of a file WeCom stored encrypted under its message's ``aeskey``; ``ForgedRequest`` if they
    do not decrypt under it."""
    key = _file_key(aeskey)
    return _decrypt(key, key[:16], data, _WECHAT_BLOCK_BITS)


def encrypt_file(aeskey: str, data: bytes) -> bytes:
    """What WeCom would store for ``data`` under ``aeskey`` (for the test peers)."""
    key = _file_key(aeskey)
    return _encrypt(key, key[:16], data, _WECHAT_BLOCK_BITS)


def _feishu_key(encrypt_key: str) -> bytes:
    return hashlib.sha256(encrypt_key.encode()).digest()


def feishu_decrypt(encrypt_key: str, encrypted: str) -> bytes:
    """The event JSON inside Feishu's ``encrypt`` field."""
    data = _unbase64(encrypted)
    return _decrypt(_feishu_key(encrypt_key), data[:16], data[16:], 128)


def feishu_encrypt(encrypt_key: str, plain: bytes | str, *, iv: bytes | None = None) -> str:
    """What Feishu would put in ``encrypt`` for ``plain`` (``iv`` fixed only in tests)."""
    body = plain.encode() if isinstance(plain, str) else plain
    vector = iv if iv is not None else os.urandom(16)
    return base64.b64encode(vector + _encrypt(_feishu_key(encrypt_key), vector, body, 128)).decode()
