"""One robot message DingTalk POSTs in HTTP mode: is it DingTalk's, is it fresh, what does it say.

DingTalk signs an HTTP callback with two headers (K2): ``timestamp`` (epoch
milliseconds) and ``sign``, the Base64 HMAC-SHA256 of ``timestamp + "\\n" +
Client Secret`` keyed with the Client Secret (the kit's
:data:`~channels._kit.signatures.DINGTALK`).  The body itself is not signed, so
the check is as strong as the secret, HTTPS and the one-hour window
(``signature_window_s``); a timestamp outside it, a missing or wrong ``sign``
is :class:`~gateway.core.errors.ForgedRequest` (401, nothing stored).  Every
request is checked before its body is read as a message.

The body is the same robot message the stream carries in a CALLBACK frame's
``data``, so it goes through the one decoder (decode.py); a message DingTalk
posts again lands on the same ``msgId`` and is answered once.  The answer is
an empty 200 once the message is durable: the reply goes out later, through
the message's ``sessionWebhook`` or the robot's API, like a stream message's.
"""

from __future__ import annotations

from collections.abc import Mapping

from channels._kit.signatures import DINGTALK, verify_hmac
from channels.dingtalk.decode import decode
from gateway.core.messages import AccountId, InboundMessage


class CallbackReader:
    """One app's secret and window, applied to each request."""

    def __init__(self, secret: str, account: AccountId, *, window_s: float | None) -> None:
        self._secret, self.account, self.window_s = secret, account, window_s

    def read(self, headers: Mapping[str, str], body: bytes) -> InboundMessage:
        """The verified message; ``ForgedRequest``, ``InvalidEvent`` or ``Skipped`` otherwise."""
        verify_hmac(headers, body, self._secret, DINGTALK, window_s=self.window_s)
        return decode(body.decode("utf-8", errors="replace"), account=self.account)
