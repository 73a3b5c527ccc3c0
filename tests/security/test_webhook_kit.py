"""The forgery generator itself, against a reference verifier for each kind of proof.

Only Telegram receives webhooks today, so the HMAC branch of
:func:`~tests.security.probes.webhooks.forgeries` has no gateway channel to run
against yet.  Checking every variant against a textbook verifier here keeps it
honest until one arrives: each forged request must fail the check a correct
channel makes, and the genuine one must pass it.
"""

from __future__ import annotations

import hmac
import time

import httpx
import pytest

from tests.security.probes.webhooks import Expect, Forgery, Proof, WebhookScheme, forgeries

SECRETS = {"main": "s3cret-main", "second": "s3cret-second"}
BODY = b'{"type": "event_callback", "event": {"text": "hi"}}'
SCHEMES = [
    WebhookScheme(channel="secret", proof=Proof.SECRET_HEADER, header="X-Secret-Token"),
    WebhookScheme(channel="hmac", proof=Proof.HMAC_SHA256, header="X-Signature", timestamp_header="X-Timestamp",
                  signature_prefix="v0=", base_string="v0:{timestamp}:{body}"),
]


def verifies(scheme: WebhookScheme, secret: str, forgery: Forgery) -> bool:
    """What a correct channel checks: exactly one proof header, equal in constant time, fresh when stamped."""
    headers = httpx.Headers(list(forgery.headers))
    proofs = headers.get_list(scheme.header)
    if len(proofs) != 1:
        return False
    if scheme.proof is Proof.SECRET_HEADER:
        return hmac.compare_digest(proofs[0].encode(), secret.encode())
    stamp = headers.get(scheme.timestamp_header or "", "")
    if not stamp.isdigit() or abs(time.time() - int(stamp)) > scheme.max_age_s:
        return False
    expected = scheme.signature_prefix + scheme.digest(secret, forgery.body, stamp)
    return hmac.compare_digest(proofs[0].encode(), expected.encode())


@pytest.mark.parametrize("scheme", SCHEMES, ids=lambda s: s.proof.value)
def test_every_forged_variant_fails_a_correct_verifier_and_the_genuine_request_passes(scheme: WebhookScheme) -> None:
    genuine = Forgery(name="genuine", expect=Expect.DROPPED, account="main", body=BODY,
                      headers=tuple(scheme.sign(SECRETS["main"], BODY)))
    assert verifies(scheme, SECRETS["main"], genuine)
    refused = [f for f in forgeries(scheme, SECRETS, BODY, {}) if f.expect is Expect.REFUSED]
    assert len({f.name for f in refused}) == len(refused) >= 12
    for forgery in refused:
        secret = SECRETS.get(forgery.account)
        if secret is not None:  # a request to an unknown account is refused by routing, not by the proof
            assert not verifies(scheme, secret, forgery), forgery.name


def test_hmac_schemes_get_the_timestamp_variants() -> None:
    names = {f.name for f in forgeries(SCHEMES[1], SECRETS, BODY, {})} - {f.name for f in forgeries(SCHEMES[0], SECRETS, BODY, {})}
    assert names == {"signed over another body", "the secret itself as the signature", "no timestamp",
                     "a stale timestamp", "a timestamp from the future"}
