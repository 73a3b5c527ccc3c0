"""A bearer JWT checked against a platform's published key set (Bot Framework / Teams, TM3).

The platform signs each request's ``Authorization: Bearer <jwt>`` with RS256;
its public keys are a JWKS at a URL (or named by an OpenID configuration
document's ``jwks_uri``).  :class:`JwksKeys` fetches that set with the
``httpx.AsyncClient`` it is handed, keeps it for ``max_age_s``, and fetches it
once more when a token names a key id it does not hold -- keys rotate, and a
new key is found at once -- but after a fetch that did not find the key id,
not again for ``refetch_floor_s``, so forged tokens with made-up key ids
cannot turn every request into a fetch.  A key may list the channels
it signs for (the Bot Framework's ``endorsements``); :func:`verify_jwt` with
``endorsement`` refuses a token whose key does not list that one.  :func:`verify_jwt` lets
PyJWT check the signature, issuer, audience and expiry (with the platform's
clock skew as ``leeway_s``) and returns the claims.

Failures are one :class:`~gateway.errors.ForgedRequest`: ``missing_header``,
``malformed``, ``stale`` (expired or not yet valid), ``bad_signature`` (wrong
key, issuer or audience).  A key set that cannot be fetched is the platform's
trouble, not the request's: :class:`~gateway.errors.PeerUnavailable`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx
import jwt

from channels._kit.signatures import header
from gateway.core.errors import ForgedRequest, PeerUnavailable


class JwksKeys:
    """The key set at ``url``, cached; ``openid=True`` when ``url`` is an OpenID configuration document."""

    def __init__(self, client: httpx.AsyncClient, url: str, *, platform: str, openid: bool = False,
                 max_age_s: float = 24 * 3600.0, refetch_floor_s: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._client, self.url, self.platform, self.openid = client, url, platform, openid
        self.max_age_s, self.refetch_floor_s, self._clock = max_age_s, refetch_floor_s, clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._endorsed: dict[str, frozenset[str]] = {}
        self._fetched_at: float | None = None
        self._missed_at: float | None = None
        """When a fetch for an unknown key id last found none: the next such fetch waits ``refetch_floor_s``."""
        self._lock = asyncio.Lock()
        self.fetches = 0

    async def key(self, kid: str) -> jwt.PyJWK:
        """The key ``kid`` names, fetching the set when it is old or does not hold ``kid``."""
        if self._fetched_at is None or self._clock() - self._fetched_at >= self.max_age_s:
            await self._refresh(self._fetched_at)
        if kid not in self._keys and (self._missed_at is None or self._clock() - self._missed_at >= self.refetch_floor_s):
            await self._refresh(self._fetched_at)
            if kid not in self._keys:
                self._missed_at = self._clock()
        try:
            return self._keys[kid]
        except KeyError:
            raise ForgedRequest(f"the token names key {kid[:40]!r}, which {self.platform} does not publish",
                                reason="bad_signature") from None

    async def _refresh(self, seen: float | None) -> None:
        async with self._lock:
            if self._fetched_at != seen:  # another request refreshed while this one waited
                return
            jwks_url = str((await self._get_json(self.url)).get("jwks_uri", "")) if self.openid else self.url
            if not jwks_url:
                raise PeerUnavailable(self.platform, f"{self.url} names no jwks_uri")
            published = await self._get_json(jwks_url)
            try:
                keys = jwt.PyJWKSet.from_dict(published).keys
            except jwt.PyJWKSetError as error:
                raise PeerUnavailable(self.platform, f"the key set at {jwks_url} holds no usable key: {error}") from error
            self._keys = {key.key_id: key for key in keys if key.key_id}
            self._endorsed = {str(raw.get("kid")): frozenset(map(str, raw["endorsements"]))
                              for raw in published.get("keys", []) if isinstance(raw, dict)
                              and isinstance(raw.get("endorsements"), list)}
            self._fetched_at = self._clock()
            self.fetches += 1

    async def load(self) -> int:
        """Fetch the set now and say how many keys it holds (a probe: proves the URLs and the network)."""
        await self._refresh(self._fetched_at)
        return len(self._keys)

    def endorsements(self, kid: str) -> frozenset[str] | None:
        """The channels key ``kid`` is endorsed for, or None when the set names none for it."""
        return self._endorsed.get(kid)

    async def _get_json(self, url: str) -> dict[str, Any]:
        try:
            response = await self._client.get(url)
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError) as error:
            raise PeerUnavailable(self.platform, f"cannot fetch {url}: {type(error).__name__}") from error
        if not isinstance(data, dict):
            raise PeerUnavailable(self.platform, f"{url} is not a JSON object")
        return data


def bearer_token(headers: Mapping[str, str]) -> str:
    scheme, _, token = header(headers, "Authorization").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ForgedRequest("the Authorization header is not a bearer token", reason="malformed")
    return token.strip()


async def verify_jwt(token: str, keys: JwksKeys, *, issuer: str | Sequence[str], audience: str,
                     leeway_s: float = 0.0, algorithms: Sequence[str] = ("RS256",),
                     endorsement: str | None = None) -> dict[str, Any]:
    """The token's claims once its signature, issuer, audience and lifetime check out (and, with
    ``endorsement``, once its key is endorsed for that channel where the set lists endorsements)."""
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.DecodeError:
        raise ForgedRequest("the bearer token is not a JWT", reason="malformed") from None
    if not isinstance(kid, str) or not kid:
        raise ForgedRequest("the token names no key id", reason="malformed")
    key = await keys.key(kid)
    endorsed = keys.endorsements(kid)
    if endorsement is not None and endorsed is not None and endorsement not in endorsed:
        raise ForgedRequest(f"the token's key is not endorsed for {endorsement[:40]!r}", reason="bad_signature")
    try:
        claims: dict[str, Any] = jwt.decode(
            token, key.key, algorithms=list(algorithms), audience=audience, issuer=issuer, leeway=leeway_s,
            options={"require": ["exp", "iss", "aud"]},
        )
    except (jwt.ExpiredSignatureError, jwt.ImmatureSignatureError) as error:
        raise ForgedRequest(f"the token is {error}", reason="stale") from None
    except jwt.DecodeError:
        raise ForgedRequest("the token's signature does not verify", reason="bad_signature") from None
    except jwt.InvalidTokenError as error:  # issuer, audience, a missing claim, an algorithm we do not take
        raise ForgedRequest(f"the token is refused: {error}", reason="bad_signature") from None
    return claims
