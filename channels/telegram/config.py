"""TelegramConfig: one bot account's settings, validated before anything connects.

The Bot API endpoint is a setting, not a constant: teachers who run their own
Bot API server (``telegram-bot-api --local``, for larger files or for privacy)
point ``api_url`` at it.  The token and the webhook secret are read from the
environment (``env:NAME``) and never printed.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from gateway.core.capabilities import capabilities_of, fetch_limit
from gateway.core.config import AccountConfig, EnvSecret

CLOUD_API = "https://api.telegram.org"
CLOUD_DOWNLOAD_LIMIT = fetch_limit(capabilities_of("telegram"))
"""The cloud Bot API hands out files up to 20 MB through getFile (platforms.toml); a local server has no such limit."""
SECRET_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
COMMAND_RE = re.compile(r"^[a-z0-9_]{1,32}$")


class TelegramConfig(AccountConfig):
    token: EnvSecret
    """The bot token BotFather gave, as ``env:TELEGRAM_TOKEN``."""
    api_url: str = CLOUD_API
    """Bot API root; methods are called at ``{api_url}/bot<token>/<method>``."""
    file_url: str | None = None
    """File download root; defaults to ``{api_url}/file/bot``."""
    mode: Literal["poll", "webhook"] = "poll"
    poll_timeout: float = Field(default=25.0, ge=0, le=50)
    """Seconds one getUpdates may wait on Telegram (the supervisor's stall limit is longer)."""
    webhook_url: str | None = None
    """Public HTTPS URL Telegram posts to: ``https://host/webhooks/telegram/<account>``."""
    webhook_secret: EnvSecret | None = None
    """Sent back by Telegram in ``X-Telegram-Bot-Api-Secret-Token``; 1-256 of ``A-Z a-z 0-9 _ -``."""
    commands: dict[str, str] = Field(default_factory=lambda: {
        "start": "Start talking with your study partner",
        "help": "What I can do for you",
    })
    """Registered with setMyCommands at start, so Telegram's menu shows them."""
    drafts: bool = True
    """Stream previews in private chats as message drafts (sendMessageDraft) instead of edits."""
    max_download_bytes: int = Field(default=CLOUD_DOWNLOAD_LIMIT, gt=0)
    """Larger inbound files are not fetched; the model reads a note saying so.  Raise it for a local Bot API
    server (which serves files of any size), lower it to keep less."""

    @model_validator(mode="after")
    def _check(self) -> TelegramConfig:
        if self.mode == "webhook":
            if not self.webhook_url:
                raise ValueError("webhook mode needs webhook_url (https://your-host/webhooks/telegram/<account>)")
            if self.webhook_secret is None:
                raise ValueError("webhook mode needs webhook_secret (env:NAME holding 1-256 of A-Z a-z 0-9 _ -)")
        if self.webhook_secret is not None and not SECRET_RE.match(self.webhook_secret.get_secret_value()):
            raise ValueError("webhook_secret must be 1-256 characters of A-Z a-z 0-9 _ - (Telegram's rule)")
        for command, description in self.commands.items():
            if not COMMAND_RE.match(command) or not 1 <= len(description) <= 256:
                raise ValueError(f"command {command!r}: names are 1-32 of a-z 0-9 _, descriptions 1-256 characters")
        return self

    @property
    def bot_url(self) -> str:
        return f"{self.api_url.rstrip('/')}/bot"

    @property
    def download_url(self) -> str:
        return self.file_url or f"{self.api_url.rstrip('/')}/file/bot"
