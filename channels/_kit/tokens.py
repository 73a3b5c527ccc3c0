"""One account's access token, fetched once and shared: the client-credentials dance every open API has.

QQ, Teams, DingTalk, Feishu and the WeChat family all hand a bot a token good
for some seconds (``expires_in``, ``expireIn``, ``expire``) in exchange for its
id and secret.  What the channel owes the platform is the same each time:

- **one fetch at a time.**  A burst of sends that finds no token waits on one
  fetch instead of asking for a token each (platforms count and cap fetches:
  WeChat allows 2,000 a day, and a second fetch can void the first);
- **fetched before its end**, by ``margin_s``, so a call never leaves with a
  token that dies on the way;
- **replaced when refused, once.**  A call the platform answers "token
  invalid" hands back the token it used (``stale``); the next ``get`` fetches
  a new one -- unless another call already did, so ten refused calls cause
  one fetch, not ten.

The channel supplies only the fetch (its URL, its field names, its errors) as
an async callable returning a :class:`Grant`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Grant:
    """A token the platform gave, and how many seconds it said the token lasts."""

    token: str
    lasts_s: float


def lifetime(value: object, default: float) -> float:
    """A token's stated life in seconds (a number or a numeric string); ``default`` when it says none."""
    if isinstance(value, bool) or not isinstance(value, int | float | str) or value == "":
        return default
    try:
        return float(value)
    except ValueError:
        return default


class AccessToken:
    """The token of one account: :meth:`get` returns a good one, fetching it when needed."""

    def __init__(self, fetch: Callable[[], Awaitable[Grant]], *, margin_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch, self.margin_s, self._clock = fetch, margin_s, clock
        self._token: str | None = None
        self._expires = 0.0
        self._lock = asyncio.Lock()
        self.fetched = 0
        """Tokens fetched since start (``/status`` and the tests read it)."""

    async def get(self, *, stale: str | None = None) -> str:
        """A good token; ``stale`` is one the platform just refused, replaced unless another call did."""
        async with self._lock:
            if self._token is not None and self._token != stale and self._clock() < self._expires:
                return self._token
            grant = await self._fetch()
            self._token, self._expires = grant.token, self._clock() + max(0.0, grant.lasts_s - self.margin_s)
            self.fetched += 1
            return grant.token

    def forget(self) -> None:
        """Drop the token held (a credential changed): the next :meth:`get` fetches."""
        self._token = None
