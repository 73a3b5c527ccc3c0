"""AES-CBC message crypto against the platforms' documented examples, and what a wrong key or id gets."""

from __future__ import annotations

import base64
import json

import pytest

from channels._kit.msgcrypt import WechatCrypto, feishu_decrypt, feishu_encrypt
from gateway.core.errors import ForgedRequest

# WeCom's documented example (W2): EncodingAESKey, corpid, and the echostr of the URL check with its plaintext.
WECOM_KEY = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
WECOM_CORP = "wx5823bf96d3bd56c7"
WECOM_ECHOSTR = "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ=="


def test_wecoms_documented_echostr_decrypts_to_its_plaintext():
    assert WechatCrypto(WECOM_KEY, WECOM_CORP).decrypt(WECOM_ECHOSTR) == b"1616140317555161061"


def test_a_message_for_another_app_id_is_refused():
    with pytest.raises(ForgedRequest) as error:
        WechatCrypto(WECOM_KEY, "wx0000000000000000").decrypt(WECOM_ECHOSTR)
    assert error.value.reason == "bad_signature"


def test_wechat_encryption_round_trips_and_pads_to_32_byte_blocks():
    crypto = WechatCrypto("abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG", "wxb11529c136998cb6")
    for message in ("", "<xml><Content><![CDATA[你好]]></Content></xml>", "x" * 12, "y" * 300):
        encrypted = crypto.encrypt(message)
        assert len(base64.b64decode(encrypted)) % 32 == 0
        assert crypto.decrypt(encrypted) == message.encode()


def test_wechat_encryption_is_the_documented_layout():
    """16 random bytes, 4-byte network-order length, message, receive id: fixed random bytes, fixed output."""
    crypto = WechatCrypto(WECOM_KEY, WECOM_CORP)
    once = crypto.encrypt("hello", random16=b"0123456789abcdef")
    assert once == crypto.encrypt("hello", random16=b"0123456789abcdef")
    assert once != crypto.encrypt("hello")
    assert crypto.decrypt(once) == b"hello"


@pytest.mark.parametrize("garbage", ["not base64!", base64.b64encode(b"short").decode(),
                                     base64.b64encode(b"\x00" * 32).decode()])
def test_a_ciphertext_that_is_not_one_is_refused_without_a_traceback(garbage):
    with pytest.raises(ForgedRequest) as error:
        WechatCrypto(WECOM_KEY, WECOM_CORP).decrypt(garbage)
    assert error.value.reason in {"malformed", "bad_signature"}


@pytest.mark.parametrize("key", ["too-short", "!" * 43])
def test_an_encoding_aes_key_that_is_not_one_is_a_config_error(key):
    with pytest.raises(ValueError):
        WechatCrypto(key, WECOM_CORP)


def test_feishus_documented_example_decrypts():
    """Feishu's "Encrypt Key" guide: key "test key" and this ciphertext say "hello world" (F5)."""
    assert feishu_decrypt("test key", "P37w+VZImNgPEO1RBhJ6RtKl7n6zymIbEG1pReEzghk=") == b"hello world"


def test_feishu_round_trips_an_event_and_refuses_another_key():
    event = json.dumps({"schema": "2.0", "header": {"event_id": "5e3702a84e847582be8db7fb73283c02"}}).encode()
    assert feishu_decrypt("encrypt-key", feishu_encrypt("encrypt-key", event)) == event
    encrypted = feishu_encrypt("encrypt-key", event, iv=b"fixed iv, 16 by.")  # fixed: a wrong key's padding is fixed too
    with pytest.raises(ForgedRequest) as error:
        feishu_decrypt("another-key", encrypted)
    assert error.value.reason == "malformed"
