"""MsteamsConfig: one Teams bot, as an Azure Bot resource and its Entra app registration show it.

Teams posts each activity to ``https://<gateway>/webhooks/msteams/<account>``
with a JWT the Bot Framework signed for the bot's *Microsoft App ID*; answers
go to the Bot Connector at the activity's ``serviceUrl`` with a token got from
Entra (client credentials: app id + client secret).  The secret is read from
the environment (``env:NAME``) and never printed.

``openid_url``, ``token_url`` and ``service_urls`` are settings so a test
peer (or a sovereign cloud) can stand in for Microsoft's; ``service_urls`` is
the allow-list a ``serviceUrl`` must start with before the gateway sends its
bearer token there -- a forged one would otherwise make the gateway post its
token to any host (SSRF).
"""

from __future__ import annotations

from pydantic import Field, field_validator

from gateway.core.config import AccountConfig, EnvSecret

OPENID_URL = "https://login.botframework.com/v1/.well-known/openidconfiguration"
ISSUER = "https://api.botframework.com"
TOKEN_URL = "https://login.microsoftonline.com/botframework.com/oauth2/v2.0/token"
SCOPE = "https://api.botframework.com/.default"
SERVICE_URLS = ("https://smba.trafficmanager.net/",)
"""Where Teams' public cloud Bot Connector lives; GCC and other clouds add theirs in ``service_urls``."""


class MsteamsConfig(AccountConfig):
    """A Teams bot: *Azure Bot → Configuration* (app id) and *Certificates & secrets* (the secret)."""

    app_id: str = Field(pattern=r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")
    """The Microsoft App ID (a GUID): the audience of every inbound token, the client of every outbound one."""
    app_password: EnvSecret
    """The client secret's *Value* (not its Secret ID)."""
    tenant_id: str = ""
    """A single-tenant bot's directory (tenant) id: its tokens come from that tenant; empty: multi-tenant."""
    openid_url: str = OPENID_URL
    """The Bot Framework's OpenID metadata: it names the signing keys (``jwks_uri``)."""
    issuer: str = ISSUER
    token_url: str = ""
    """Where the outbound token comes from; empty: Entra's, for ``tenant_id`` or botframework.com."""
    scope: str = SCOPE
    service_urls: tuple[str, ...] = SERVICE_URLS
    """Prefixes an activity's ``serviceUrl`` must start with; nothing is sent anywhere else."""

    @field_validator("service_urls")
    @classmethod
    def _slashed(cls, urls: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(url if url.endswith("/") else url + "/" for url in urls)

    @property
    def token_endpoint(self) -> str:
        if self.token_url:
            return self.token_url
        return TOKEN_URL.replace("botframework.com", self.tenant_id) if self.tenant_id else TOKEN_URL
