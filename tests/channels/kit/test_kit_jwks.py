"""A bearer JWT against a JWKS served over httpx's transport seam, as the Bot Framework publishes it."""

from __future__ import annotations

import time
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from channels._kit.jwks import JwksKeys, bearer_token, verify_jwt
from gateway.core.errors import ForgedRequest, PeerUnavailable

ISSUER = "https://api.botframework.com"
APP_ID = "00000000-0000-0000-0000-000000000001"
OPENID = "https://login.example.test/v1/.well-known/openidconfiguration"
KEYS_URL = "https://login.example.test/v1/.well-known/keys"


class KeyServer:
    """Publishes the public halves of the keys it holds; counts how often it was asked."""

    def __init__(self) -> None:
        self.private: dict[str, rsa.RSAPrivateKey] = {}
        self.requests: list[str] = []
        self.down = False

    def add(self, kid: str) -> rsa.RSAPrivateKey:
        self.private[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return self.private[kid]

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(str(request.url))
        if self.down:
            return httpx.Response(503)
        if str(request.url) == OPENID:
            return httpx.Response(200, json={"issuer": ISSUER, "jwks_uri": KEYS_URL})
        keys = [{**jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": kid, "use": "sig",
                 "endorsements": ["msteams"]} for kid, key in self.private.items()]
        return httpx.Response(200, json={"keys": keys})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def token(key: rsa.RSAPrivateKey, kid: str, **claims: Any) -> str:
    now = int(time.time())
    body = {"iss": ISSUER, "aud": APP_ID, "exp": now + 600, "nbf": now - 10, "serviceUrl": "https://smba.example.test/"}
    return jwt.encode({**body, **claims}, key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture
def server() -> KeyServer:
    server = KeyServer()
    server.add("k1")
    return server


@pytest.fixture
async def http(server: KeyServer):
    async with httpx.AsyncClient(transport=httpx.MockTransport(server.handle)) as client:
        yield client


async def test_a_token_signed_by_a_published_key_gives_its_claims(server, http):
    keys = JwksKeys(http, OPENID, platform="msteams", openid=True)
    claims = await verify_jwt(token(server.private["k1"], "k1"), keys, issuer=ISSUER, audience=APP_ID)
    assert claims["serviceUrl"] == "https://smba.example.test/"
    assert server.requests == [OPENID, KEYS_URL]


async def test_the_key_set_is_cached_between_requests(server, http):
    keys = JwksKeys(http, KEYS_URL, platform="msteams")
    for _ in range(3):
        await verify_jwt(token(server.private["k1"], "k1"), keys, issuer=ISSUER, audience=APP_ID)
    assert keys.fetches == 1


async def test_an_unknown_key_id_refreshes_the_set_once(server, http):
    clock = Clock()
    keys = JwksKeys(http, KEYS_URL, platform="msteams", refetch_floor_s=300, clock=clock)
    await verify_jwt(token(server.private["k1"], "k1"), keys, issuer=ISSUER, audience=APP_ID)
    clock.now += 301
    rotated = server.add("k2")  # the platform rotated its keys
    await verify_jwt(token(rotated, "k2"), keys, issuer=ISSUER, audience=APP_ID)
    assert keys.fetches == 2


async def test_made_up_key_ids_do_not_turn_every_request_into_a_fetch(server, http):
    clock = Clock()
    keys = JwksKeys(http, KEYS_URL, platform="msteams", refetch_floor_s=300, clock=clock)
    await verify_jwt(token(server.private["k1"], "k1"), keys, issuer=ISSUER, audience=APP_ID)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for _ in range(5):
        with pytest.raises(ForgedRequest) as error:
            await verify_jwt(token(stranger, "nope"), keys, issuer=ISSUER, audience=APP_ID)
        assert error.value.reason == "bad_signature"
    assert keys.fetches == 2  # the first made-up kid is looked for once (it could be a new key); the rest wait


async def test_a_key_rotated_right_after_the_first_fetch_is_found_at_once(server, http):
    keys = JwksKeys(http, KEYS_URL, platform="msteams", refetch_floor_s=300, clock=Clock())
    await verify_jwt(token(server.private["k1"], "k1"), keys, issuer=ISSUER, audience=APP_ID)
    rotated = server.add("k2")
    await verify_jwt(token(rotated, "k2"), keys, issuer=ISSUER, audience=APP_ID)
    assert keys.fetches == 2


async def test_the_set_is_fetched_again_when_it_is_old(server, http):
    clock = Clock()
    keys = JwksKeys(http, KEYS_URL, platform="msteams", max_age_s=3600, clock=clock)
    await verify_jwt(token(server.private["k1"], "k1"), keys, issuer=ISSUER, audience=APP_ID)
    clock.now += 3600
    await verify_jwt(token(server.private["k1"], "k1"), keys, issuer=ISSUER, audience=APP_ID)
    assert keys.fetches == 2


@pytest.mark.parametrize("claims, expected", [
    ({"exp": int(time.time()) - 600}, "stale"),
    ({"nbf": int(time.time()) + 600}, "stale"),
    ({"aud": "another-bot"}, "bad_signature"),
    ({"iss": "https://sts.example.test/"}, "bad_signature"),
])
async def test_expiry_audience_and_issuer_are_checked(server, http, claims, expected):
    keys = JwksKeys(http, KEYS_URL, platform="msteams")
    with pytest.raises(ForgedRequest) as error:
        await verify_jwt(token(server.private["k1"], "k1", **claims), keys, issuer=ISSUER, audience=APP_ID)
    assert error.value.reason == expected


async def test_the_platforms_clock_skew_is_allowed(server, http):
    keys = JwksKeys(http, KEYS_URL, platform="msteams")
    late = token(server.private["k1"], "k1", exp=int(time.time()) - 60)
    assert await verify_jwt(late, keys, issuer=ISSUER, audience=APP_ID, leeway_s=300)


async def test_a_token_signed_by_another_key_under_a_known_id_is_refused(server, http):
    keys = JwksKeys(http, KEYS_URL, platform="msteams")
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(ForgedRequest) as error:
        await verify_jwt(token(forger, "k1"), keys, issuer=ISSUER, audience=APP_ID)
    assert error.value.reason == "bad_signature"


async def test_an_unsigned_token_is_refused(server, http):
    keys = JwksKeys(http, KEYS_URL, platform="msteams")
    unsigned = jwt.encode({"iss": ISSUER, "aud": APP_ID, "exp": int(time.time()) + 60}, None, algorithm="none",
                          headers={"kid": "k1"})
    with pytest.raises(ForgedRequest) as error:
        await verify_jwt(unsigned, keys, issuer=ISSUER, audience=APP_ID)
    assert error.value.reason == "bad_signature"


async def test_a_key_set_that_cannot_be_fetched_is_the_platforms_trouble(server, http):
    server.down = True
    keys = JwksKeys(http, KEYS_URL, platform="msteams")
    with pytest.raises(PeerUnavailable):
        await verify_jwt(token(server.private["k1"], "k1"), keys, issuer=ISSUER, audience=APP_ID)


def test_the_bearer_header_is_read_and_anything_else_refused():
    assert bearer_token({"authorization": "Bearer abc.def.ghi"}) == "abc.def.ghi"
    for headers, expected in [({}, "missing_header"), ({"Authorization": "Basic dXNlcjpwYXNz"}, "malformed")]:
        with pytest.raises(ForgedRequest) as error:
            bearer_token(headers)
        assert error.value.reason == expected


async def test_garbage_is_malformed(server, http):
    with pytest.raises(ForgedRequest) as error:
        await verify_jwt("not-a-jwt", JwksKeys(http, KEYS_URL, platform="msteams"), issuer=ISSUER, audience=APP_ID)
    assert error.value.reason == "malformed"
