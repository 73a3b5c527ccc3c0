"""DiscordConfig: one bot (one Discord application) and the endpoints it talks to."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from gateway.core.config import AccountConfig, EnvSecret

DISCORD_API = "https://discord.com/api/v10"
DISCORD_GATEWAY = "wss://gateway.discord.gg/"
PUBLIC_KEY = re.compile(r"^[0-9a-fA-F]{64}$")


class DiscordConfig(AccountConfig):
    token: EnvSecret = Field(description="the bot token from the Developer Portal's Bot page (env:DISCORD_TOKEN)")
    message_content: bool = True
    """Ask for the privileged MESSAGE_CONTENT intent (enable it on the Bot page first).  Without it the
    bot still reads DMs, messages that mention it and replies to it, but not other guild chatter."""
    slash_commands: bool = True
    """Register ``/ask``, ``/stop`` and ``/link`` for the application when the account starts."""
    long_answer_thread: str | None = Field(default="The whole answer", min_length=1, max_length=100)
    """The name of the thread a long answer to a server channel's message continues in; null keeps it in the channel."""
    api_base: str = DISCORD_API
    """Discord's REST base; a test peer or a proxy sets its own.  One per process (discord.py keeps it per class)."""
    gateway_url: str = DISCORD_GATEWAY
    """Discord's Gateway address; after the first connection Discord's ``resume_gateway_url`` is used."""
    catch_up_max_age_s: float = Field(default=86400.0, gt=0)
    """On a new Gateway session, messages missed in known channels are fetched back this far (24 h)."""
    public_key: str | None = None
    """The application's Public Key (General Information page, 64 hex digits).  Set, the account also takes
    interactions Discord POSTs to ``/webhooks/discord/<account>`` (its Interactions Endpoint URL)."""

    @field_validator("public_key")
    @classmethod
    def _hex_key(cls, value: str | None) -> str | None:
        if value is not None and not PUBLIC_KEY.match(value.strip()):
            raise ValueError("public_key is the application's Public Key from Developer Portal > General Information: "
                             "64 hex digits (not the bot token, not the application id)")
        return value.strip() if value is not None else None
