"""Webhook signature checks: is this request from the platform, and is it fresh?

Each check takes the request's raw body and headers (any case-insensitive
mapping: Starlette's ``request.headers``, or a plain dict) plus the secret from
the account's config, and either returns :class:`Verified` or raises one
:class:`~gateway.errors.ForgedRequest` whose ``reason`` says which check failed
(``missing_header``, ``malformed``, ``bad_signature``, ``stale``, ``replayed``).
Signatures are compared with :func:`hmac.compare_digest`, never ``==``.

The timestamp window is a platform fact (Slack's 5 minutes): the channel reads
``signature_window_s`` from ``channels/platforms.toml`` and passes it in.  A
:class:`~channels._kit.replay.ReplayMemory` passed as ``replays`` refuses a
signature seen before inside the window; the caller releases the claim
(:attr:`Verified.replay_key`) if the request could not be made durable.

- :func:`verify_hmac` with an :class:`HmacScheme`: Slack's ``v0:{ts}:{body}``
  (:data:`SLACK_V0`), Meta's ``X-Hub-Signature-256`` (:data:`META_HUB`), or any
  platform that signs a template of timestamp and body with HMAC-SHA256.
- :func:`verify_ed25519`: Discord interactions and QQ (timestamp + body).
- :func:`verify_feishu`: SHA-256 over timestamp + nonce + encrypt key + body.
- :func:`verify_wechat` / :func:`verify_wechat_msg`: WeChat and WeCom's SHA-1
  over the sorted token, timestamp, nonce (and ciphertext).
- :func:`verify_shared_secret`: a secret the platform repeats in a header
  (Telegram's ``X-Telegram-Bot-Api-Secret-Token``, a Matrix appservice's bearer).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from channels._kit.replay import ReplayMemory
from gateway.core.errors import ForgedRequest


@dataclass(frozen=True)
class Verified:
    """A request that passed: the timestamp it was signed at (if signed with one) and its replay claim."""

    timestamp: int | None = None
    replay_key: str | None = None


def header(headers: Mapping[str, str], name: str) -> str:
    """The value of ``name`` in any casing, or ``ForgedRequest(reason="missing_header")``."""
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name.lower()), None)
    if not value:
        raise ForgedRequest(f"no {name}", reason="missing_header")
    return value


def check_window(timestamp: str, window_s: float | None, *, now: float | None = None, unit: Literal["s", "ms"] = "s") -> int:
    """The timestamp as an integer; ``stale`` when it is more than ``window_s`` from now (either way)."""
    try:
        value = int(timestamp.strip())
    except ValueError:
        raise ForgedRequest(f"timestamp {timestamp[:20]!r} is not a number", reason="malformed") from None
    if window_s is not None:
        seconds = value / 1000 if unit == "ms" else value
        skew = abs((time.time() if now is None else now) - seconds)
        if skew > window_s:
            raise ForgedRequest(f"signed {skew:.0f} s from now, outside the {window_s:g} s window", reason="stale")
    return value


def _claim(replays: ReplayMemory | None, key: str, timestamp: int | None) -> Verified:
    if replays is not None:
        replays.claim(key)
    return Verified(timestamp=timestamp, replay_key=key if replays is not None else None)


def verify_shared_secret(headers: Mapping[str, str], name: str, secret: str) -> Verified:
    """The header ``name`` holds exactly ``secret`` (no signature: the platform repeats what it was given)."""
    if not hmac.compare_digest(header(headers, name).encode(), secret.encode()):
        raise ForgedRequest(f"{name} does not match", reason="bad_signature")
    return Verified()


# --------------------------------------------------------------------------- HMAC-SHA256


@dataclass(frozen=True)
class HmacScheme:
    """How one platform signs with HMAC-SHA256: the headers, the signed text, the digest's spelling.

    ``basestring`` may hold ``{body}`` (the raw body, as bytes), and holds ``{timestamp}`` exactly when
    there is a timestamp header; ``{secret}`` stands for the secret itself.  Slack signs
    ``v0:{timestamp}:{body}`` and writes ``v0=<hex>``; DingTalk signs only ``{timestamp}\n{secret}``."""

    signature_header: str
    timestamp_header: str | None = None
    basestring: str = "{body}"
    prefix: str = ""
    encoding: Literal["hex", "base64"] = "hex"
    timestamp_unit: Literal["s", "ms"] = "s"

    def __post_init__(self) -> None:
        if self.basestring.count("{body}") > 1 or ("{timestamp}" in self.basestring) != bool(self.timestamp_header):
            raise ValueError("a basestring names {body} at most once, and {timestamp} exactly when there is a timestamp header")

    def sign(self, secret: bytes, body: bytes, timestamp: str | None = None) -> str:
        """The header value this scheme expects for ``body`` (what the platform would send)."""
        head, has_body, tail = self.basestring.partition("{body}")
        fill = {"timestamp": timestamp or "", "secret": secret.decode() if "{secret}" in self.basestring else ""}
        message = head.format(**fill).encode() + (body if has_body else b"") + tail.format(**fill).encode()
        digest = hmac.new(secret, message, hashlib.sha256).digest()
        text = digest.hex() if self.encoding == "hex" else base64.b64encode(digest).decode()
        return self.prefix + text


SLACK_V0 = HmacScheme("X-Slack-Signature", "X-Slack-Request-Timestamp", "v0:{timestamp}:{body}", prefix="v0=")
"""Slack's signing secret, version 0 (S6)."""
META_HUB = HmacScheme("X-Hub-Signature-256", prefix="sha256=")
"""Meta's app-secret signature of the raw body (WhatsApp Cloud, Messenger, Instagram; WA4): no timestamp."""
DINGTALK = HmacScheme("sign", "timestamp", "{timestamp}\n{secret}", encoding="base64", timestamp_unit="ms")
"""DingTalk's HTTP callback (K2): Base64 HMAC of the millisecond timestamp and the app secret; the body is
not signed, so the window (``signature_window_s``) and the replay memory carry the weight."""


def verify_hmac(
    headers: Mapping[str, str], body: bytes, secret: bytes | str, scheme: HmacScheme = SLACK_V0, *,
    window_s: float | None = None, replays: ReplayMemory | None = None, now: float | None = None,
) -> Verified:
    """Check ``scheme``'s signature over ``body``; with a timestamp header, that it is inside ``window_s``."""
    key = secret.encode() if isinstance(secret, str) else secret
    given = header(headers, scheme.signature_header).strip()
    timestamp_text = header(headers, scheme.timestamp_header) if scheme.timestamp_header else None
    timestamp = (check_window(timestamp_text, window_s, now=now, unit=scheme.timestamp_unit)
                 if timestamp_text is not None else None)
    expected = scheme.sign(key, body, timestamp_text)
    if scheme.encoding == "hex":
        given = given[: len(scheme.prefix)] + given[len(scheme.prefix):].lower()
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise ForgedRequest(f"{scheme.signature_header} does not match the body", reason="bad_signature")
    return _claim(replays, given, timestamp)


# --------------------------------------------------------------------------- Ed25519


def ed25519_public_key(hex_key: str) -> Ed25519PublicKey:
    """The key from its hex form (Discord's "public key" in the developer portal); ``ValueError`` if it is not one."""
    try:
        return Ed25519PublicKey.from_public_bytes(bytes.fromhex(hex_key.strip()))
    except ValueError as error:
        raise ValueError("an Ed25519 public key is 64 hex digits") from error


def ed25519_key_from_secret(secret: str) -> Ed25519PrivateKey:
    """QQ's signing key: the bot secret repeated to a 32-byte seed (Q2).  Its public half checks
    QQ's webhooks; the private half signs the answer to the URL validation (op 13)."""
    if not secret:
        raise ValueError("an empty bot secret seeds no key")
    seed = secret
    while len(seed) < 32:
        seed += seed
    return Ed25519PrivateKey.from_private_bytes(seed[:32].encode())


def verify_ed25519(
    public_key: Ed25519PublicKey, headers: Mapping[str, str], body: bytes, *,
    signature_header: str = "X-Signature-Ed25519", timestamp_header: str = "X-Signature-Timestamp",
    window_s: float | None = None, replays: ReplayMemory | None = None, now: float | None = None,
) -> Verified:
    """Check an Ed25519 signature over timestamp + body (Discord interactions D4, QQ webhooks Q2)."""
    signature_hex = header(headers, signature_header).strip().lower()
    timestamp_text = header(headers, timestamp_header)
    timestamp = check_window(timestamp_text, window_s, now=now)
    try:
        signature = bytes.fromhex(signature_hex)
    except ValueError:
        raise ForgedRequest(f"{signature_header} is not hex", reason="malformed") from None
    try:
        public_key.verify(signature, timestamp_text.encode() + body)
    except InvalidSignature:
        raise ForgedRequest(f"{signature_header} does not match the body", reason="bad_signature") from None
    return _claim(replays, signature_hex, timestamp)


# --------------------------------------------------------------------------- Feishu


def feishu_signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def verify_feishu(
    headers: Mapping[str, str], body: bytes, encrypt_key: str, *,
    window_s: float | None = None, replays: ReplayMemory | None = None, now: float | None = None,
) -> Verified:
    """Check ``X-Lark-Signature`` = SHA-256(timestamp + nonce + encrypt key + raw body) (F5)."""
    given = header(headers, "X-Lark-Signature").strip().lower()
    timestamp_text = header(headers, "X-Lark-Request-Timestamp")
    nonce = header(headers, "X-Lark-Request-Nonce")
    timestamp = check_window(timestamp_text, window_s, now=now)
    if not hmac.compare_digest(given.encode(), feishu_signature(timestamp_text, nonce, encrypt_key, body).encode()):
        raise ForgedRequest("X-Lark-Signature does not match the body", reason="bad_signature")
    return _claim(replays, given, timestamp)


# --------------------------------------------------------------------------- WeChat / WeCom


def wechat_signature(token: str, *parts: str) -> str:
    """SHA-1 of the token and the parts sorted as strings and joined (X2, W2)."""
    return hashlib.sha1("".join(sorted((token, *parts))).encode()).hexdigest()


def _param(query: Mapping[str, str], name: str) -> str:
    value = query.get(name)
    if not value:
        raise ForgedRequest(f"no {name} parameter", reason="missing_header")
    return value


def verify_wechat(query: Mapping[str, str], token: str, *, window_s: float | None = None,
                  replays: ReplayMemory | None = None, now: float | None = None) -> Verified:
    """A plain-mode WeChat request: ``signature`` = SHA-1(sorted token, timestamp, nonce), in the query."""
    return _verify_sorted(query, token, "signature", (), window_s, replays, now)


def verify_wechat_msg(query: Mapping[str, str], token: str, encrypted: str, *, window_s: float | None = None,
                      replays: ReplayMemory | None = None, now: float | None = None) -> Verified:
    """A safe-mode WeChat or WeCom request: ``msg_signature`` = SHA-1(sorted token, timestamp, nonce, ciphertext).

    ``encrypted`` is the ``Encrypt`` element of the body, or the ``echostr`` of WeCom's GET check."""
    return _verify_sorted(query, token, "msg_signature", (encrypted,), window_s, replays, now)


def _verify_sorted(query: Mapping[str, str], token: str, name: str, extra: tuple[str, ...],
                   window_s: float | None, replays: ReplayMemory | None, now: float | None) -> Verified:
    given = _param(query, name).strip().lower()
    timestamp_text, nonce = _param(query, "timestamp"), _param(query, "nonce")
    timestamp = check_window(timestamp_text, window_s, now=now)
    if not hmac.compare_digest(given.encode(), wechat_signature(token, timestamp_text, nonce, *extra).encode()):
        raise ForgedRequest(f"{name} does not match", reason="bad_signature")
    return _claim(replays, given, timestamp)


__all__ = [
    "DINGTALK", "META_HUB", "SLACK_V0", "HmacScheme", "Verified", "check_window", "ed25519_key_from_secret", "ed25519_public_key",
    "feishu_signature", "header", "verify_ed25519", "verify_feishu", "verify_hmac", "verify_wechat",
    "verify_shared_secret", "verify_wechat_msg", "wechat_signature",
]
