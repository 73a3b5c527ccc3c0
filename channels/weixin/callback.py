"""One callback from WeChat to an Official Account: is it WeChat's, is it fresh, and what does it say.

The three modes the teacher can choose in the admin console (X1, X2):

- **plaintext** (明文): the XML as is; ``signature`` in the query is
  SHA-1 over the sorted token, ``timestamp`` and ``nonce``.
- **safe** (安全): the XML holds only ``<Encrypt>``; ``msg_signature`` covers
  the ciphertext too, and the message inside names the account's appid.  A
  request without ``<Encrypt>`` is refused: in safe mode WeChat never sends one,
  and taking it would let a forger skip the key.
- **compatible** (兼容): both; the encrypted copy is read when there is one.

A signature that does not match, a missing one, or a ``timestamp`` further from
now than ``signature_window_s`` (platforms.toml) is the kit's
:class:`~gateway.errors.ForgedRequest`: 401, nothing stored.  A body that is not
a callback is :class:`~gateway.errors.InvalidEvent`: 400.  Verification comes
first, so an unsigned body is never parsed beyond finding its ``<Encrypt>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from channels._kit.msgcrypt import WechatCrypto
from channels._kit.signatures import verify_wechat, verify_wechat_msg
from channels._kit.wechat_xml import read_fields
from channels.weixin.config import OfficialAccountConfig
from gateway.core.errors import ForgedRequest


@dataclass(frozen=True)
class Callback:
    """What a verified callback said, and whether its answer goes back encrypted."""

    fields: dict[str, str]
    encrypted: bool


class CallbackReader:
    """One account's token, key and mode, applied to each request."""

    def __init__(self, config: OfficialAccountConfig, window_s: float | None) -> None:
        self.mode, self.window_s = config.mode, window_s
        self.token = config.token.get_secret_value()
        key = config.encoding_aes_key
        self.crypto = WechatCrypto(key.get_secret_value(), config.appid) if key is not None else None

    def read(self, query: Mapping[str, str], body: bytes) -> Callback:
        outer = read_fields(body)
        encrypted = outer.get("Encrypt")
        if encrypted and self.mode != "plaintext":
            assert self.crypto is not None, "OfficialAccountConfig refuses compatible and safe mode without a key"
            verify_wechat_msg(query, self.token, encrypted, window_s=self.window_s)
            return Callback(read_fields(self.crypto.decrypt(encrypted)), encrypted=True)
        if self.mode == "safe":
            verify_wechat(query, self.token, window_s=self.window_s)  # a forged request is told it is forged first
            raise ForgedRequest("safe mode: the callback is not encrypted", reason="malformed")
        verify_wechat(query, self.token, window_s=self.window_s)
        return Callback(outer, encrypted=False)
