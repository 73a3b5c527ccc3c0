"""The wire to the Bot Connector: the app's token, activities posted, errors translated once.

**The token.**  Entra's token endpoint hands out a bearer token for the
Bot Connector by client credentials (``grant_type=client_credentials``,
the App ID and secret, scope ``https://api.botframework.com/.default``),
good for ``expires_in`` seconds.  It is kept until a minute before it ends,
fetched under a lock (calls that start together fetch one), and fetched again
once when the connector answers 401; a second 401 is the account's problem.
Entra's ``invalid_client`` / ``unauthorized_client`` are ``AuthFailed``.

**Activities.**  ``POST {serviceUrl}/v3/conversations/{id}/activities``
posts one; ``.../activities/{replyToId}`` posts it as the reply to a
learner's message (Teams threads it where the conversation has threads).
The answer's ``id`` is the new activity's.  The connector takes no
idempotency key, so a send whose answer was lost may show twice: ADR 0022
keeps that to one send per account.

**Errors** (TM2): 429 with ``Retry-After`` -> RateLimited; 401 -> AuthFailed;
403 -> Forbidden (the bot was removed from that chat, or a stream was
stopped: ``ContentStreamNotAllowed``, stream.py); 404 NotFound;
412, 502, 504 and other 5xx -> PeerUnavailable (Teams asks for a retry on them).
No header, token or secret is ever logged; errors name the call only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx

from channels._kit.http_errors import BodyCodes, ErrorKind, json_body, translate
from channels._kit.tokens import AccessToken, Grant, lifetime
from channels.msteams.config import MsteamsConfig
from gateway.core.errors import AuthFailed, PeerUnavailable, PeerUnreachable
from gateway.endpoints import origin, why_unreachable

log = logging.getLogger(__name__)
PLATFORM = "msteams"
TIMEOUT = httpx.Timeout(15.0, connect=5.0)
TOKEN_MARGIN_S = 60.0
TOKEN_CODES = BodyCodes(code_field="error", kinds={"invalid_client": ErrorKind.AUTH_FAILED,
                                                   "unauthorized_client": ErrorKind.AUTH_FAILED})
OVERRIDES = {412: ErrorKind.UNAVAILABLE}


class ConnectorApi:
    """One bot's calls, on an ``httpx.AsyncClient`` it is handed (or makes, and then closes)."""

    def __init__(self, config: MsteamsConfig, client: httpx.AsyncClient | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config, self._clock = config, clock
        self.client = client or httpx.AsyncClient(timeout=TIMEOUT, trust_env=False)
        self._owned = client is None
        self.tokens = AccessToken(self._grant, margin_s=TOKEN_MARGIN_S, clock=clock)

    async def _request(self, url: str, action: str, **kwargs: Any) -> dict:
        try:
            response = await self.client.post(url, **kwargs)
        except httpx.HTTPError as error:
            why = why_unreachable(error)
            if why is not None:
                raise PeerUnreachable(PLATFORM, origin(url), why, check="the network, serviceUrl or token_url",
                                      action=action) from None
            raise PeerUnavailable(PLATFORM, f"{action}: {type(error).__name__}") from None
        parsed = json_body(response.content)
        inner = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(inner, dict):  # the connector's {"error": {"code", "message"}}, said in one line
            parsed = {**parsed, "message": f"{inner.get('code', '')}: {inner.get('message', '')}"}
        failed = translate(PLATFORM, action, response.status_code, response.headers, parsed,
                           codes=TOKEN_CODES if action == "token" else None, overrides=OVERRIDES)
        if failed is not None:
            raise failed
        return parsed if isinstance(parsed, dict) else {}

    @property
    def fetched(self) -> int:
        return self.tokens.fetched

    async def token(self, *, stale: str | None = None) -> str:
        """A good token; ``stale`` is one the connector just refused, replaced unless another call did."""
        return await self.tokens.get(stale=stale)

    async def _grant(self) -> Grant:
        said = await self._request(self.config.token_endpoint, "token", data={
            "grant_type": "client_credentials", "client_id": self.config.app_id,
            "client_secret": self.config.app_password.get_secret_value(), "scope": self.config.scope})
        token = said.get("access_token")
        if not isinstance(token, str) or not token:
            raise AuthFailed(PLATFORM, "token: no access_token (check app_id and app_password)")
        lasts = lifetime(said.get("expires_in"), 3600.0)
        log.info("msteams token fetched app_id=%s lasts_s=%g", self.config.app_id, lasts)
        return Grant(token, lasts)

    async def post(self, service_url: str, conversation: str, activity: dict, *, reply_to: str | None = None) -> str:
        """Post ``activity`` into ``conversation`` (as the reply to ``reply_to``); the new activity's id."""
        path = f"v3/conversations/{quote(conversation, safe='')}/activities"
        if reply_to:
            path += "/" + quote(reply_to, safe="")
        url = service_url.rstrip("/") + "/" + path
        token = await self.token()
        try:
            said = await self._request(url, "send", json=activity, headers=_auth(token))
        except AuthFailed:
            log.info("msteams token refused, fetching a new one app_id=%s", self.config.app_id)
            said = await self._request(url, "send", json=activity, headers=_auth(await self.token(stale=token)))
        return str(said.get("id") or "")

    async def close(self) -> None:
        if self._owned:
            await self.client.aclose()


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
