"""How a platform proves a webhook came from it, declared once, and the forgeries that follow from it.

A channel joins the forged-webhook suite (``tests/security/test_webhook_forgery.py``)
by declaring a :class:`WebhookScheme` -- which header carries the proof, and
whether that proof is the shared secret itself (Telegram) or an HMAC-SHA256
signature over a timestamp and the body (Slack, Feishu, DingTalk and the
like) -- and a rig (:class:`WebhookRig`).  :func:`forgeries` then derives the
requests that must be refused from the declaration alone: nothing here knows a
platform by name, so a new channel is tested against every variant without
writing one.

The declaration lives in the test kit for now; when verification moves into a
channel kit (issue 11), the channel itself declares it and this module reads
that declaration.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Protocol

import httpx
import pytest
from pydantic import BaseModel, ConfigDict, Field

from gateway.app import Gateway
from gateway.http.app import MAX_BODY_BYTES

OVERSIZED_BYTES = MAX_BODY_BYTES + 1
"""One byte over the gateway's body limit."""


class Proof(str, Enum):
    SECRET_HEADER = "secret_header"
    """The header carries the shared secret verbatim (Telegram's ``secret_token``)."""
    HMAC_SHA256 = "hmac_sha256"
    """The header carries HMAC-SHA256(secret, base string) in hex; a second header the timestamp."""


class WebhookScheme(BaseModel):
    """How one platform authenticates the webhooks it sends."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    channel: str
    proof: Proof
    header: str
    """The header carrying the secret or the signature."""
    timestamp_header: str | None = None
    """HMAC schemes: the header carrying the Unix time the signature covers."""
    signature_prefix: str = ""
    """HMAC schemes: what precedes the hex digest in the header (Slack: ``v0=``)."""
    base_string: str = "{timestamp}:{body}"
    """HMAC schemes: what is signed; ``{timestamp}`` and ``{body}`` are filled in."""
    max_age_s: int = Field(default=300, gt=0)
    """HMAC schemes: how old (or how far ahead) a timestamp may be and still verify."""

    def sign(self, secret: str, body: bytes, *, now: float | None = None) -> list[tuple[str, str]]:
        """The headers a genuine platform request carries for ``body``."""
        if self.proof is Proof.SECRET_HEADER:
            return [(self.header, secret)]
        stamp = str(int(time.time() if now is None else now))
        return [(self.header, self.signature_prefix + self.digest(secret, body, stamp)),
                (self.timestamp_header or "", stamp)]

    def digest(self, secret: str, body: bytes, stamp: str) -> str:
        signed = self.base_string.format(timestamp=stamp, body=body.decode("utf-8", "replace"))
        return hmac.new(secret.encode(), signed.encode(), hashlib.sha256).hexdigest()


class Expect(str, Enum):
    REFUSED = "refused"
    """401 (or 404 for an account that does not exist), and no row, no turn."""
    TOO_LARGE = "too large"
    """413 before the body is read."""
    DROPPED = "dropped"
    """Authentic but undecodable: 400, or 200 with the event counted as invalid; no turn."""


class Forgery(BaseModel):
    """One request that must not reach the model, and how it must be answered."""

    model_config = ConfigDict(frozen=True)

    name: str
    expect: Expect
    account: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    query: tuple[tuple[str, str], ...] = ()


class WebhookRig(Protocol):
    """A running gateway with two webhook accounts of one channel, as the forgery suite drives it."""

    scheme: WebhookScheme
    gateway: Gateway
    http: httpx.AsyncClient
    """Talks to the gateway's HTTP app."""
    secrets: Mapping[str, str]
    """Account -> its webhook secret; at least two accounts, with different secrets."""

    def path(self, account: str) -> str: ...

    def event(self, number: int, text: str) -> bytes:
        """A minimal valid event body: message ``number`` from one learner, saying ``text``."""
        ...

    async def turns(self) -> int:
        """How many turns reached the model (the responder) so far."""
        ...

    async def covered(self) -> list[str]:
        """The event id of every message the turns so far answered, once per time it was answered."""
        ...

    async def replies(self) -> int:
        """How many replies the learner who sends :meth:`event` has seen at the platform's peer."""
        ...

    def inbound_rows(self) -> int:
        """Rows this channel has in the gateway's inbox (anything made durable, answered or not)."""
        ...

    async def settle(self) -> None:
        """Wait until the gateway has nothing left to do."""
        ...


RigOpener = Callable[[pytest.FixtureRequest, Path], AbstractAsyncContextManager[WebhookRig]]
"""``(request, data_dir)`` -> the rig; ``request`` reaches the session's peer fixtures."""


def forgeries(scheme: WebhookScheme, secrets: Mapping[str, str], valid: bytes,
              malformed: Mapping[str, bytes]) -> Iterator[Forgery]:
    """Every refused variant of a request to the first account, derived from ``scheme``."""
    account, other = list(secrets)[:2]
    secret, others_secret = secrets[account], secrets[other]
    genuine = scheme.sign(secret, valid)
    proof = genuine[0][1]

    def forged(name: str, headers: list[tuple[str, str]], *, to: str = account, body: bytes = valid,
               query: tuple[tuple[str, str], ...] = ()) -> Forgery:
        return Forgery(name=name, expect=Expect.REFUSED, account=to, body=body, headers=tuple(headers), query=query)

    rest = genuine[1:]  # an HMAC scheme's timestamp rides along unchanged
    yield forged("no proof header", rest)
    yield forged("empty proof", [(scheme.header, ""), *rest])
    yield forged("wrong value", [(scheme.header, "guess"), *rest])
    yield forged("right value in another case", [(scheme.header, _other_case(proof)), *rest])
    yield forged("a prefix of the proof", [(scheme.header, proof[:-1]), *rest])
    yield forged("the proof with a suffix", [(scheme.header, proof + "x"), *rest])
    yield forged("the proof with its last character changed", [(scheme.header, _changed_last(proof)), *rest])
    yield forged("the proof twice in one header", [(scheme.header, f"{proof},{proof}"), *rest])
    yield forged("the header twice, both wrong", [(scheme.header, "guess"), (scheme.header, "guess2"), *rest])
    yield forged("the header twice, wrong first", [(scheme.header, "guess"), (scheme.header, proof), *rest])
    yield forged("the proof in the query string", rest, query=((scheme.header, proof), ("secret", secret)))
    yield forged("a valid proof of another account", scheme.sign(others_secret, valid))
    yield forged("a valid proof, to an account that does not exist", genuine, to="nobody")
    if scheme.proof is Proof.HMAC_SHA256:
        yield forged("signed over another body", scheme.sign(secret, valid + b" "))
        yield forged("the secret itself as the signature", [(scheme.header, secret), *rest])
        yield forged("no timestamp", genuine[:1])
        yield forged("a stale timestamp", scheme.sign(secret, valid, now=time.time() - 2 * scheme.max_age_s))
        yield forged("a timestamp from the future", scheme.sign(secret, valid, now=time.time() + 2 * scheme.max_age_s))
    oversized = valid + b" " * OVERSIZED_BYTES
    yield Forgery(name="an oversized body", expect=Expect.TOO_LARGE, account=account, body=oversized,
                  headers=tuple(scheme.sign(secret, oversized)))
    for name, body in {"not JSON": b"{not json", "empty body": b"", "binary": b"\xff\xfe\x00\x01",
                       "JSON null": b"null", "a JSON list": b"[]", "a JSON string": json.dumps("hi").encode(),
                       **malformed}.items():
        yield Forgery(name=name, expect=Expect.DROPPED, account=account, body=body, headers=tuple(scheme.sign(secret, body)))


def _other_case(text: str) -> str:
    """``text`` with its letters' case swapped -- or, for a proof with no letters, a changed character."""
    swapped = text.swapcase()
    return swapped if swapped != text else _changed_last(text)


def _changed_last(text: str) -> str:
    """As long as ``text``, differing in its last character only (what a timing attack would probe)."""
    return text[:-1] + ("1" if text[-1:] != "1" else "2")


async def post(rig: WebhookRig, forgery: Forgery) -> httpx.Response:
    """Send ``forgery`` as a platform would: POST, JSON content type, headers exactly as listed."""
    headers = httpx.Headers([("content-type", "application/json"), *forgery.headers])
    return await rig.http.post(rig.path(forgery.account), content=forgery.body, headers=headers,
                               params=list(forgery.query))



@dataclass(frozen=True)
class WebhookChannel:
    """A webhook channel's entry in the suites: its scheme, its rig, and bodies it cannot read."""

    scheme: WebhookScheme
    open: RigOpener
    malformed: Mapping[str, bytes]
    """Authentic bodies the channel cannot read: missing fields, wrong types, unknown event kinds."""

    def forgery_names(self) -> list[str]:
        """The variants :func:`forgeries` derives, known at collection time (names need no real secret)."""
        return [f.name for f in forgeries(self.scheme, {"a": "secret-a", "b": "secret-b"}, b"{}", self.malformed)]
