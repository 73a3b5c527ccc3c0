"""One request QQ posts to the webhook: is it QQ's, is it fresh, and what op is it.

QQ signs every callback with Ed25519 over ``X-Signature-Timestamp`` + the raw
body, the key seeded from the bot's AppSecret (Q2).  Every request is checked
before its body is read -- the URL validation (op 13) too: answering an
unsigned op 13 would make the bot sign any text a stranger chose with its own
key.  A signature that does not match, or a timestamp further from now than
``signature_window_s``, is :class:`~gateway.core.errors.ForgedRequest` (401,
nothing stored); a signed body that is not a QQ payload is
:class:`~gateway.core.errors.InvalidEvent` (400).

The ops the webhook speaks (Q2):

- **13**, validation: ``d`` holds ``plain_token`` and ``event_ts``; the
  answer is ``{plain_token, signature}``, the signature ours over
  ``event_ts + plain_token`` (:meth:`WebhookReader.validation_answer`).
- **0**, dispatch: ``t`` names the event, ``d`` holds it; answered op 12
  (:data:`ACK`) once the event is durable.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from channels._kit.signatures import ed25519_key_from_secret, verify_ed25519
from channels.qq.config import QQConfig
from gateway.core.errors import InvalidEvent

DISPATCH, ACK_OP, VALIDATION = 0, 12, 13
ACK: dict[str, int] = {"op": ACK_OP, "d": 0}
"""What tells QQ "received": op 12 (the answer must come within 3 s, Q3)."""


class Payload(BaseModel):
    """QQ's envelope: ``op``, and for a dispatch the event ``id``, its type ``t``, data ``d`` and (on the websocket
    gateway) its sequence ``s``."""

    model_config = ConfigDict(extra="ignore")
    op: int
    id: str = ""
    t: str = ""
    d: Any = None
    s: int | None = None


class Validation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    plain_token: str
    event_ts: str


class WebhookReader:
    """One bot's key, applied to each request."""

    def __init__(self, config: QQConfig, window_s: float | None) -> None:
        self._key = ed25519_key_from_secret(config.app_secret.get_secret_value())
        self.public_key = self._key.public_key()
        self.window_s = window_s

    def read(self, headers: Mapping[str, str], body: bytes) -> Payload:
        """The verified payload; :class:`ForgedRequest` or :class:`InvalidEvent` otherwise."""
        verify_ed25519(self.public_key, headers, body, window_s=self.window_s)
        try:
            return Payload.model_validate_json(body)
        except ValidationError as error:
            raise InvalidEvent(f"qq webhook: not a QQ payload ({error.error_count()} problems)") from None

    def validation_answer(self, payload: Payload) -> dict[str, str]:
        """The answer to op 13: the ``plain_token`` back, and our signature over ``event_ts + plain_token``."""
        try:
            asked = Validation.model_validate(payload.d)
        except ValidationError:
            raise InvalidEvent("qq webhook: op 13 without plain_token and event_ts") from None
        signature = self._key.sign((asked.event_ts + asked.plain_token).encode()).hex()
        return {"plain_token": asked.plain_token, "signature": signature}
