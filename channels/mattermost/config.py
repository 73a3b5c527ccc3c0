"""Mattermost account settings: which server, the bot's access token, and how far back a catch-up reaches.

A Mattermost bot account (System Console > Integrations > Bot Accounts) gets a
personal access token; it is the whole login, for REST (``Authorization:
Bearer``) and for the websocket's ``authentication_challenge``.  Who the bot is
(its user id and username) is asked of the server (``GET /api/v4/users/me``), not
configured, so a copied token cannot be paired with the wrong id.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from gateway.core.config import AccountConfig, EnvSecret


class MattermostConfig(AccountConfig):
    url: str = Field(min_length=1)
    """The server's address as people open it (``https://chat.school.example``); the API is under ``/api/v4``."""
    token: EnvSecret
    """The bot account's access token, read from the environment (``env:NAME``); never logged."""
    thread_replies: bool = True
    """In channels and group messages, answer in a thread under the learner's post (``root_id``), so a
    class channel is not filled with answers; direct messages are answered where they were said."""
    catch_up_max_age_s: float = Field(default=86400.0, gt=0)
    """After a reconnect, posts missed while no socket was open are fetched back this far, no further."""
    max_download_bytes: int | None = Field(default=None, gt=0)
    """The most bytes of one inbound file; the platform's default upload limit when unset."""
    open_timeout_s: float = Field(default=10.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> MattermostConfig:
        object.__setattr__(self, "url", self.url.rstrip("/"))
        return self

    @property
    def api(self) -> str:
        return f"{self.url}/api/v4"

    @property
    def websocket_url(self) -> str:
        scheme, _, rest = self.url.partition("://")
        return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/api/v4/websocket"
