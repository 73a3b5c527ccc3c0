"""The GET handshakes a platform sends before it will post events to a webhook URL.

The HTTP app hands ``GET /webhooks/{channel}/{account}`` to the channel's
``verify_webhook``; the channel answers with one of these and
:func:`challenge_response`:

- **Meta** (WhatsApp Cloud, Messenger, Instagram; WA4): ``hub.mode=subscribe``,
  the ``hub.verify_token`` the teacher typed into the app dashboard, and a
  ``hub.challenge`` to echo back.  A token that does not match is refused with
  ``reason="bad_token"``, which the app answers 403 as Meta expects.
- **WeChat** official accounts (X2): ``signature`` over the sorted token,
  ``timestamp`` and ``nonce``; echo ``echostr`` once it verifies.
- **WeCom** (W2): ``msg_signature`` also covers ``echostr``, which is
  encrypted; echo its decrypted plaintext.

Slack and Feishu check the URL with a POST instead: a ``url_verification``
event whose ``challenge`` goes back as ``{"challenge": ...}``
(:func:`url_verification`, :func:`challenge_json`).  Slack's is signed like any
event; Feishu's carries the Verification Token (inside the ``encrypt`` field
when an Encrypt Key is set, so decrypt first).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from starlette.responses import JSONResponse, PlainTextResponse

from channels._kit.msgcrypt import WechatCrypto
from channels._kit.signatures import verify_wechat, verify_wechat_msg
from gateway.core.errors import ForgedRequest


def _param(query: Mapping[str, str], name: str) -> str:
    value = query.get(name)
    if not value:
        raise ForgedRequest(f"no {name} parameter", reason="missing_header")
    return value


def meta_challenge(query: Mapping[str, str], verify_token: str) -> str:
    """The ``hub.challenge`` to echo, once mode and verify token are right."""
    mode, token, challenge = (_param(query, name) for name in ("hub.mode", "hub.verify_token", "hub.challenge"))
    if mode != "subscribe":
        raise ForgedRequest(f"hub.mode is {mode[:20]!r}, not 'subscribe'", reason="malformed")
    if not hmac.compare_digest(token.encode(), verify_token.encode()):
        raise ForgedRequest("hub.verify_token is not this account's verify token", reason="bad_token")
    return challenge


def wechat_echostr(query: Mapping[str, str], token: str) -> str:
    """The ``echostr`` to echo, once ``signature`` verifies."""
    verify_wechat(query, token)
    return _param(query, "echostr")


def wecom_echostr(query: Mapping[str, str], token: str, crypto: WechatCrypto) -> str:
    """The decrypted ``echostr`` to echo, once ``msg_signature`` (which covers it) verifies."""
    echostr = _param(query, "echostr")
    verify_wechat_msg(query, token, echostr)
    return crypto.decrypt(echostr).decode("utf-8", "replace")


def challenge_response(text: str) -> PlainTextResponse:
    """The challenge echoed as the platforms want it: the bare text, no quotes, no JSON."""
    return PlainTextResponse(text)


def url_verification(event: Mapping[str, Any], *, verification_token: str | None = None) -> str | None:
    """The ``challenge`` of a ``url_verification`` POST (Slack, Feishu), or None for any other event.

    With ``verification_token`` the event's ``token`` must match it (Feishu's Verification Token)."""
    if event.get("type") != "url_verification":
        return None
    challenge = event.get("challenge")
    if not isinstance(challenge, str) or not challenge:
        raise ForgedRequest("a url_verification without a challenge", reason="malformed")
    if verification_token is not None:
        token = event.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(token.encode(), verification_token.encode()):
            raise ForgedRequest("the url_verification's token is not this account's", reason="bad_token")
    return challenge


def challenge_json(challenge: str) -> JSONResponse:
    """``{"challenge": ...}``, the answer Slack and Feishu both take."""
    return JSONResponse({"challenge": challenge})
