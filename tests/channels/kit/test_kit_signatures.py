"""Webhook signature checks, each against the platform's documented example where one is published."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from channels._kit.replay import ReplayMemory
from channels._kit.signatures import (
    DINGTALK,
    META_HUB,
    SLACK_V0,
    HmacScheme,
    ed25519_key_from_secret,
    ed25519_public_key,
    feishu_signature,
    verify_ed25519,
    verify_feishu,
    verify_hmac,
    verify_shared_secret,
    verify_wechat,
    verify_wechat_msg,
    wechat_signature,
)
from gateway.core.errors import ForgedRequest

# Slack's own example from "Verifying requests from Slack" (S6): secret, timestamp, body and signature.
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_TS = "1531420618"
SLACK_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
    b"&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
    b"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
SLACK_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
SLACK_HEADERS = {"X-Slack-Request-Timestamp": SLACK_TS, "X-Slack-Signature": SLACK_SIGNATURE}
NOW = float(SLACK_TS) + 10


def reason(error: pytest.ExceptionInfo[ForgedRequest]) -> str:
    return error.value.reason


def test_slacks_documented_example_verifies_with_its_timestamp():
    verified = verify_hmac(SLACK_HEADERS, SLACK_BODY, SLACK_SECRET, SLACK_V0, window_s=300, now=NOW)
    assert verified.timestamp == int(SLACK_TS)


def test_header_names_are_matched_in_any_case():
    lower = {name.lower(): value for name, value in SLACK_HEADERS.items()}
    assert verify_hmac(lower, SLACK_BODY, SLACK_SECRET, window_s=300, now=NOW).timestamp == int(SLACK_TS)


@pytest.mark.parametrize("tamper", ["body", "secret", "timestamp", "signature"])
def test_any_changed_byte_is_a_bad_signature(tamper):
    headers, body, secret = dict(SLACK_HEADERS), SLACK_BODY, SLACK_SECRET
    if tamper == "body":
        body = body.replace(b"foobar", b"foobaz")
    elif tamper == "secret":
        secret = secret[:-1] + "6"
    elif tamper == "timestamp":
        headers["X-Slack-Request-Timestamp"] = str(int(SLACK_TS) + 1)
    else:
        headers["X-Slack-Signature"] = SLACK_SIGNATURE[:-1] + "4"
    with pytest.raises(ForgedRequest) as error:
        verify_hmac(headers, body, secret, window_s=300, now=NOW)
    assert reason(error) == "bad_signature"


@pytest.mark.parametrize("skew", [301, -301])
def test_a_timestamp_outside_the_window_is_stale_either_way(skew):
    with pytest.raises(ForgedRequest) as error:
        verify_hmac(SLACK_HEADERS, SLACK_BODY, SLACK_SECRET, window_s=300, now=float(SLACK_TS) + skew)
    assert reason(error) == "stale"


def test_the_window_edge_is_inside():
    assert verify_hmac(SLACK_HEADERS, SLACK_BODY, SLACK_SECRET, window_s=300, now=float(SLACK_TS) + 300)


@pytest.mark.parametrize("missing", ["X-Slack-Request-Timestamp", "X-Slack-Signature"])
def test_a_missing_header_is_named(missing):
    headers = {k: v for k, v in SLACK_HEADERS.items() if k != missing}
    with pytest.raises(ForgedRequest) as error:
        verify_hmac(headers, SLACK_BODY, SLACK_SECRET, window_s=300, now=NOW)
    assert reason(error) == "missing_header" and missing in error.value.detail


def test_a_timestamp_that_is_no_number_is_malformed():
    with pytest.raises(ForgedRequest) as error:
        verify_hmac({**SLACK_HEADERS, "X-Slack-Request-Timestamp": "soon"}, SLACK_BODY, SLACK_SECRET, window_s=300)
    assert reason(error) == "malformed"


def test_the_same_signed_request_twice_is_a_replay_until_released():
    replays = ReplayMemory(300)
    first = verify_hmac(SLACK_HEADERS, SLACK_BODY, SLACK_SECRET, window_s=300, replays=replays, now=NOW)
    with pytest.raises(ForgedRequest) as error:
        verify_hmac(SLACK_HEADERS, SLACK_BODY, SLACK_SECRET, window_s=300, replays=replays, now=NOW)
    assert reason(error) == "replayed"
    assert first.replay_key is not None
    replays.release(first.replay_key)  # the first could not be made durable: the platform's retry must pass
    assert verify_hmac(SLACK_HEADERS, SLACK_BODY, SLACK_SECRET, window_s=300, replays=replays, now=NOW)


def test_an_upper_case_signature_is_the_same_signature_for_the_replay_memory():
    replays = ReplayMemory(300)
    verify_hmac(SLACK_HEADERS, SLACK_BODY, SLACK_SECRET, window_s=300, replays=replays, now=NOW)
    shouting = {**SLACK_HEADERS, "X-Slack-Signature": "v0=" + SLACK_SIGNATURE[3:].upper()}
    with pytest.raises(ForgedRequest) as error:
        verify_hmac(shouting, SLACK_BODY, SLACK_SECRET, window_s=300, replays=replays, now=NOW)
    assert reason(error) == "replayed"


def test_metas_body_signature_has_no_timestamp():
    body = b'{"object":"whatsapp_business_account","entry":[]}'
    headers = {"X-Hub-Signature-256": META_HUB.sign(b"app-secret", body)}
    assert headers["X-Hub-Signature-256"].startswith("sha256=")
    assert verify_hmac(headers, body, "app-secret", META_HUB).timestamp is None
    with pytest.raises(ForgedRequest):
        verify_hmac(headers, body + b" ", "app-secret", META_HUB)


def test_a_generic_scheme_signs_its_own_template_in_base64_with_millisecond_timestamps():
    scheme = HmacScheme("X-Sign", "X-Time", "{timestamp}\n{body}", encoding="base64", timestamp_unit="ms")
    body = b'{"n":1}'
    headers = {"X-Time": "1700000000000", "X-Sign": scheme.sign(b"k", body, "1700000000000")}
    assert verify_hmac(headers, body, b"k", scheme, window_s=3600, now=1_700_000_100.0).timestamp == 1700000000000
    with pytest.raises(ForgedRequest) as error:
        verify_hmac(headers, body, b"k", scheme, window_s=3600, now=1_700_003_601.0)
    assert reason(error) == "stale"


def test_dingtalk_signs_its_millisecond_timestamp_and_the_secret_within_an_hour():
    headers = {"timestamp": "1700000000000", "sign": DINGTALK.sign(b"app-secret", b"", "1700000000000")}
    body = b'{"msgtype":"text"}'
    assert verify_hmac(headers, body, "app-secret", DINGTALK, window_s=3600, now=1_700_000_100.0)
    with pytest.raises(ForgedRequest) as stale:
        verify_hmac(headers, body, "app-secret", DINGTALK, window_s=3600, now=1_700_003_601.0)
    with pytest.raises(ForgedRequest) as wrong:
        verify_hmac(headers, body, "another-secret", DINGTALK, window_s=3600, now=1_700_000_100.0)
    assert (reason(stale), reason(wrong)) == ("stale", "bad_signature")


def test_a_scheme_that_cannot_be_signed_is_refused_when_written():
    with pytest.raises(ValueError):
        HmacScheme("X-Sign", "X-Time", "{body}")  # a timestamp header the signed text never uses
    with pytest.raises(ValueError):
        HmacScheme("X-Sign", basestring="v0:{timestamp}")
    with pytest.raises(ValueError):
        HmacScheme("X-Sign", basestring="{body}{body}")


# --------------------------------------------------------------------------- Ed25519 (Discord, QQ)


def discord_request(private: Ed25519PrivateKey, body: bytes, timestamp: str = "1700000000") -> dict[str, str]:
    return {"X-Signature-Ed25519": private.sign(timestamp.encode() + body).hex(), "X-Signature-Timestamp": timestamp}


def test_ed25519_over_timestamp_and_body_verifies_with_the_portals_hex_key():
    private = Ed25519PrivateKey.generate()
    public_hex = private.public_key().public_bytes_raw().hex()
    body = b'{"type":1}'
    verified = verify_ed25519(ed25519_public_key(public_hex), discord_request(private, body), body)
    assert verified.timestamp == 1700000000


def test_ed25519_refuses_what_discord_sends_to_test_the_endpoint():
    """Discord sends requests with invalid signatures to check the endpoint refuses them (D4)."""
    private, other = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    body = b'{"type":1}'
    for headers, body_sent, expected in [
        (discord_request(other, body), body, "bad_signature"),
        (discord_request(private, body), b'{"type":2}', "bad_signature"),
        ({**discord_request(private, body), "X-Signature-Ed25519": "zz"}, body, "malformed"),
        ({"X-Signature-Timestamp": "1700000000"}, body, "missing_header"),
    ]:
        with pytest.raises(ForgedRequest) as error:
            verify_ed25519(private.public_key(), headers, body_sent)
        assert reason(error) == expected


def test_ed25519_with_a_window_and_replay_memory():
    private = Ed25519PrivateKey.generate()
    body = b"{}"
    headers = discord_request(private, body)
    replays = ReplayMemory(60)
    verify_ed25519(private.public_key(), headers, body, window_s=60, replays=replays, now=1_700_000_030.0)
    with pytest.raises(ForgedRequest) as replayed:
        verify_ed25519(private.public_key(), headers, body, window_s=60, replays=replays, now=1_700_000_030.0)
    with pytest.raises(ForgedRequest) as stale:
        verify_ed25519(private.public_key(), headers, body, window_s=60, now=1_700_000_061.0)
    assert (reason(replayed), reason(stale)) == ("replayed", "stale")


def test_a_public_key_that_is_not_one_is_a_config_error():
    with pytest.raises(ValueError, match="64 hex digits"):
        ed25519_public_key("not-a-key")


def test_qqs_key_from_the_bot_secret_signs_the_documented_url_validation():
    """QQ's own example (Q2): secret DG5g3B4j9X2KOErG signs event_ts + plain_token of an op 13."""
    key = ed25519_key_from_secret("DG5g3B4j9X2KOErG")
    assert key.sign(b"1725442341" + b"Arq0D5A61EgUu4OxUvOp").hex() == (
        "87befc99c42c651b3aac0278e71ada338433ae26fcb24307bdc5ad38c1adc2d0"
        "1bcfcadc0842edac85e85205028a1132afe09280305f13aa6909ffc2d652c706")
    body = b'{"op":0}'
    assert verify_ed25519(key.public_key(), discord_request(key, body, "1725442341"), body)
    with pytest.raises(ValueError):
        ed25519_key_from_secret("")


# --------------------------------------------------------------------------- Feishu


def test_feishus_signature_covers_timestamp_nonce_key_and_body():
    body = b'{"encrypt":"abc"}'
    headers = {"X-Lark-Request-Timestamp": "1700000000", "X-Lark-Request-Nonce": "13579",
               "X-Lark-Signature": feishu_signature("1700000000", "13579", "encrypt-key", body)}
    assert verify_feishu(headers, body, "encrypt-key", window_s=300, now=1_700_000_001.0).timestamp == 1700000000
    with pytest.raises(ForgedRequest) as error:
        verify_feishu({**headers, "X-Lark-Request-Nonce": "24680"}, body, "encrypt-key")
    assert reason(error) == "bad_signature"


# --------------------------------------------------------------------------- WeChat / WeCom

# WeCom's documented example for "verify the callback URL" (W2): token, timestamp, nonce, echostr, msg_signature.
WECOM_TOKEN = "QDG6eK"
WECOM_QUERY = {
    "msg_signature": "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3", "timestamp": "1409659589", "nonce": "263014780",
    "echostr": "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ==",
}


def test_wecoms_documented_msg_signature_verifies():
    verified = verify_wechat_msg(WECOM_QUERY, WECOM_TOKEN, WECOM_QUERY["echostr"])
    assert verified.timestamp == 1409659589
    with pytest.raises(ForgedRequest) as error:
        verify_wechat_msg(WECOM_QUERY, "another", WECOM_QUERY["echostr"])
    assert reason(error) == "bad_signature"


def test_wechat_sorts_before_hashing():
    assert wechat_signature("b", "c", "a") == wechat_signature("a", "b", "c")
    query = {"timestamp": "1409304348", "nonce": "xxxxxx"}
    query["signature"] = wechat_signature("pamtest", query["timestamp"], query["nonce"])
    assert verify_wechat(query, "pamtest").timestamp == 1409304348
    with pytest.raises(ForgedRequest) as error:
        verify_wechat({k: v for k, v in query.items() if k != "nonce"}, "pamtest")
    assert reason(error) == "missing_header"


def test_a_repeated_shared_secret_must_match_exactly():
    assert verify_shared_secret({"x-telegram-bot-api-secret-token": "s3cret"}, "X-Telegram-Bot-Api-Secret-Token", "s3cret")
    for headers, expected in [({"X-Telegram-Bot-Api-Secret-Token": "s3cre"}, "bad_signature"), ({}, "missing_header")]:
        with pytest.raises(ForgedRequest) as error:
            verify_shared_secret(headers, "X-Telegram-Bot-Api-Secret-Token", "s3cret")
        assert error.value.reason == expected
