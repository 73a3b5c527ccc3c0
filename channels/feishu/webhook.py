"""The event webhook's checks: signature, decryption, the URL check and the Verification Token.

Feishu POSTs each event to the request URL set under *Events & Callbacks*.  With an Encrypt Key the body
is ``{"encrypt": "<Base64>"}`` (AES-256-CBC, key SHA-256 of the Encrypt Key, IV in front) and the request
is signed: ``X-Lark-Signature`` = SHA-256(timestamp + nonce + Encrypt Key + raw body).  Every event (and
the URL check) carries the Verification Token, in ``header.token`` (schema 2.0) or ``token``.

The order, for a request that is not the platform's to be refused before anything is read:

1. with an Encrypt Key, the body is decrypted; an event (not the URL check, which Feishu sends unsigned)
   must carry a valid signature -- a forged or missing one is ``ForgedRequest`` (401) and nothing is stored;
2. ``url_verification``: its token checked, its ``challenge`` echoed (``{"challenge": ...}``);
3. with a Verification Token, the event's token must match (constant time), else 401.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from typing import Any

from channels._kit.challenges import url_verification
from channels._kit.msgcrypt import feishu_decrypt
from channels._kit.signatures import Verified, verify_feishu
from channels.feishu.config import FeishuConfig
from gateway.core.errors import ForgedRequest, InvalidEvent


def _json(data: bytes) -> dict[str, Any]:
    try:
        said = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise InvalidEvent("feishu webhook body is not JSON") from None
    if not isinstance(said, dict):
        raise InvalidEvent("feishu webhook body is not an object")
    return said


class Webhook:
    """One account's webhook checks; :meth:`read` gives the challenge to echo, or the event to decode."""

    def __init__(self, settings: FeishuConfig, window_s: float | None) -> None:
        self.encrypt_key = settings.encrypt_key.get_secret_value() if settings.encrypt_key else None
        self.token = settings.verification_token.get_secret_value() if settings.verification_token else None
        self.window_s = window_s

    def read(self, headers: Mapping[str, str], body: bytes) -> tuple[str | None, dict[str, Any], Verified | None]:
        """``(challenge, event, verified)``: a challenge to answer, or a checked event to decode.

        No replay memory: a replayed event lands on its ``event_id`` and the inbox answers it once."""
        outer = _json(body)
        event, verified = outer, None
        if self.encrypt_key is not None:
            if not isinstance(outer.get("encrypt"), str):
                raise ForgedRequest("an unencrypted body for an account with an Encrypt Key", reason="malformed")
            try:
                event = _json(feishu_decrypt(self.encrypt_key, outer["encrypt"]))
            except InvalidEvent:
                raise ForgedRequest("the body does not decrypt with this account's Encrypt Key", reason="malformed") from None
        challenge = url_verification(event, verification_token=self.token)
        if challenge is not None:
            return challenge, event, None
        if self.encrypt_key is not None:
            verified = verify_feishu(headers, body, self.encrypt_key, window_s=self.window_s)
        if self.token is not None:
            header = event.get("header")
            given = header.get("token") if isinstance(header, dict) else event.get("token")
            if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self.token.encode()):
                raise ForgedRequest("the event's Verification Token is not this account's", reason="bad_signature")
        return None, event, verified
