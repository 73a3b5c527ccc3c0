"""Is this request from the Bot Framework, for this bot, about a Bot Connector we may talk to (TM3)?

Every activity Teams posts carries ``Authorization: Bearer <jwt>``, RS256,
signed with a key the Bot Framework publishes under its OpenID metadata.  The
token is accepted only when all of these hold:

- its key is in the published set (an unknown ``kid`` refetches the set once:
  keys rotate; the kit bounds how often) and endorsed for the activity's
  ``channelId`` (``msteams``) where the set lists endorsements;
- issuer ``https://api.botframework.com``, audience the bot's App ID, not
  expired or not yet valid, with five minutes' clock skew (platforms.toml);
- its ``serviceurl`` claim is the activity's ``serviceUrl``, and that URL
  starts with one of ``service_urls`` -- the gateway posts its own bearer
  token there, so a URL it was not told to trust is refused, never fetched.

Any failure is :class:`~gateway.core.errors.ForgedRequest` (401), before
anything is stored.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from channels._kit.jwks import JwksKeys, bearer_token, verify_jwt
from channels.msteams.config import MsteamsConfig
from gateway.core.errors import ForgedRequest

PLATFORM = "msteams"


class InboundAuth:
    """One bot's check of each request, with the key set cached between them."""

    def __init__(self, config: MsteamsConfig, client: httpx.AsyncClient, skew_s: float | None) -> None:
        self.config, self.skew_s = config, skew_s or 0.0
        self.keys = JwksKeys(client, config.openid_url, platform=PLATFORM, openid=True)

    async def check(self, headers: Mapping[str, str], *, channel_id: str, service_url: str | None) -> None:
        """Refuse what is not the Bot Framework's; ``service_url`` None checks the token alone (a body
        that is no activity, answered 400 only when signed)."""
        token = bearer_token(headers)
        claims = await verify_jwt(token, self.keys, issuer=self.config.issuer, audience=self.config.app_id,
                                  leeway_s=self.skew_s, endorsement=channel_id or PLATFORM)
        if service_url is None:
            return
        claimed = str(claims.get("serviceurl") or claims.get("serviceUrl") or "")
        if claimed.rstrip("/") != service_url.rstrip("/"):
            raise ForgedRequest("the activity's serviceUrl is not the one its token names", reason="bad_signature")
        if not allowed(self.config, service_url):
            raise ForgedRequest(f"serviceUrl {service_url[:60]!r} is not in service_urls", reason="bad_signature")


def allowed(config: MsteamsConfig, service_url: str) -> bool:
    """Whether the gateway may send its token to ``service_url`` (a prefix of ``service_urls``)."""
    url = service_url if service_url.endswith("/") else service_url + "/"
    return any(url.startswith(prefix) for prefix in config.service_urls)
