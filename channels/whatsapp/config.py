"""WhatsappConfig: one business phone number on the WhatsApp Cloud API, as Meta's app dashboard shows it.

Meta posts each event to ``https://your-host/webhooks/whatsapp/<account>``,
signed with the app's *App secret* (``X-Hub-Signature-256``); the URL is
confirmed once by a GET carrying the *verify token* the teacher typed in the
dashboard.  Sends go to ``{graph_base}/{api_version}/{phone_number_id}/messages``
with a (permanent, system-user) *access token*.  The three secrets are read from
the environment (``env:NAME``) and never printed.

``graph_base`` and ``api_version`` are settings: Meta versions the Graph API
and retires old versions, and a test peer (or a proxy) stands in for it.

``templates`` names, per partner, the message templates Meta approved for the
business: outside the learner's 24-hour customer-service window only a template
can be sent (WA2).  A partner's ``reminder`` template carries a reminder's text
as its one body parameter (``{{1}}``).  The key is the partner's name as the
bindings show it, or ``"*"`` for every partner without one of its own.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.core.config import AccountConfig, EnvSecret

GRAPH_BASE = "https://graph.facebook.com"
API_VERSION = "v24.0"


class Template(BaseModel):
    """A template Meta approved: its name and the language it was approved in (``en_US``, ``zh_CN``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(min_length=1, max_length=512, pattern=r"^[a-z0-9_]+$")
    language: str = Field(default="en_US", min_length=2, max_length=15)


class PartnerTemplates(BaseModel):
    """The templates one partner may send outside the window, by what they are for."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    reminder: Template | None = None


class WhatsappConfig(AccountConfig):
    """A WhatsApp business number: *WhatsApp → API Setup* and *App settings → Basic* in Meta's dashboard."""

    phone_number_id: str = Field(min_length=1, max_length=32, pattern=r"^[0-9]+$")
    """The *Phone number ID* (not the phone number itself): where sends go and whose events are ours."""
    access_token: EnvSecret
    """A system user's permanent token with ``whatsapp_business_messaging``."""
    app_secret: EnvSecret
    """The app's *App secret*: the key of every webhook's ``X-Hub-Signature-256``."""
    verify_token: EnvSecret
    """What the teacher typed as *Verify token* with the callback URL; Meta's GET check repeats it."""
    graph_base: str = GRAPH_BASE
    api_version: str = Field(default=API_VERSION, pattern=r"^v[0-9]+\.[0-9]+$")
    templates: dict[str, PartnerTemplates] = {}

    @field_validator("graph_base")
    @classmethod
    def _base(cls, value: str) -> str:
        return value.rstrip("/")

    def templates_for(self, partner: str | None) -> PartnerTemplates:
        """The partner's own templates, else the ``"*"`` entry's, else none."""
        return self.templates.get(partner or "") or self.templates.get("*") or PartnerTemplates()

    def url(self, path: str) -> str:
        return f"{self.graph_base}/{self.api_version}/{path}"
