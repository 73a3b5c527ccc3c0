"""SlackConfig: one Slack app installed in one workspace, validated before anything connects.

A Slack account is one app's installation in one workspace: the bot token
(``xoxb-``) is per workspace, so a gateway serving three workspaces has three
accounts.  Socket Mode is the default because it needs no public address: the
gateway dials out with the app-level token (``xapp-``).  The Events API mode
needs the signing secret instead, and Slack posts to
``https://your-host/webhooks/slack/<account>``.  Every secret is read from the
environment (``env:NAME``) and never printed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gateway.core.capabilities import capabilities_of
from gateway.core.config import AccountConfig, EnvSecret

CLOUD_API = "https://slack.com/api/"
ACK_DEADLINE_S = capabilities_of("slack").ack_deadline_s


class SlackConfig(AccountConfig):
    bot_token: EnvSecret
    """The Bot User OAuth Token (``xoxb-...``) from the app's *OAuth & Permissions* page."""
    app_token: EnvSecret | None = None
    """The app-level token (``xapp-...``, scope ``connections:write``) Socket Mode connects with."""
    signing_secret: EnvSecret | None = None
    """The app's signing secret (*Basic Information*), which signs every Events API request."""
    mode: Literal["socket", "events"] = "socket"
    api_base: str = CLOUD_API
    """Web API root; methods are called at ``{api_base}<method>`` (a test peer, or a proxy)."""
    streaming: bool = True
    """Stream answers with chat.startStream/appendStream/stopStream where the workspace has them."""
    thinking_status: str = Field(default="is thinking…", min_length=1, max_length=50)
    """What an assistant thread shows while the partner works (assistant.threads.setStatus)."""
    suggested_prompts: tuple[str, ...] = Field(default=(), max_length=4)
    """Offered when a learner opens an assistant thread (at most four, Slack's limit)."""
    socket_grace_s: float = Field(default=10.0, gt=0)
    """How long the socket may be down (Slack's refresh hand-over) before the account counts as failed."""
    max_download_bytes: int = Field(default=20 * 1024 * 1024, gt=0)
    read_locale: bool = True
    """Ask Slack each learner's language (users.info, scope ``users:read``) so the gateway's own notices
    follow it; off, they are in the partner's first language."""
    locale_timeout_s: float = Field(default=1.0, gt=0)
    """How long an event waits for users.info before it goes on without a locale: the wait is inside
    Slack's ack deadline, so it must leave most of it to the store."""
    locale_cache_s: float = Field(default=3600.0, gt=0)
    """How long a learner's locale is reused before it is asked again (a changed language shows within it)."""
    locale_cache_size: int = Field(default=10_000, ge=1)
    """How many learners' locales one account remembers; the least recently seen go first."""

    @model_validator(mode="after")
    def _check(self) -> SlackConfig:
        if self.mode == "socket" and self.app_token is None:
            raise ValueError("socket mode needs app_token (env:NAME holding the xapp-... app-level token)")
        if self.mode == "events" and self.signing_secret is None:
            raise ValueError("events mode needs signing_secret (env:NAME holding the app's signing secret)")
        if ACK_DEADLINE_S is not None and self.locale_timeout_s * 2 > ACK_DEADLINE_S:
            raise ValueError(f"locale_timeout_s must be at most half of Slack's {ACK_DEADLINE_S:g} s ack deadline")
        if not self.api_base.endswith("/"):
            object.__setattr__(self, "api_base", self.api_base + "/")
        return self
