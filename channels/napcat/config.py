"""NapCat account settings: which way the websocket goes, its access token, and the explicit opt-in.

NapCat drives a personal QQ account through an unofficial client; Tencent's
risk control can freeze or ban an account it catches.  So the channel is off
until the teacher writes ``i_understand_the_ban_risk: true`` in the account:
without it the config is refused at load, naming the setting, instead of a QQ
account quietly put at risk by a copied example.

``mode: forward`` (the default) dials NapCat's websocket server (``ws_url``);
``mode: reverse`` waits for NapCat's websocket client to connect to the gateway
at ``/channels/napcat/<account>/ws``.  The access token is required either way:
forward, NapCat checks it; reverse, the gateway does -- a route on the
gateway's public HTTP app must never take an unauthenticated QQ session.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from gateway.core.config import AccountConfig, EnvSecret

OPT_IN = "i_understand_the_ban_risk"
RISK = ("NapCat logs a personal QQ account in through an unofficial client: Tencent may freeze or ban that "
        "account, and nothing in the gateway can undo it. Use a QQ account made for the bot, never a person's own.")


class NapcatConfig(AccountConfig):
    i_understand_the_ban_risk: bool = False
    """The teacher's explicit yes to the ban risk above; the account does not load without it."""
    mode: Literal["forward", "reverse"] = "forward"
    ws_url: str = "ws://127.0.0.1:3001"
    """Forward mode: NapCat's websocket server (WebUI → Network → Websocket server)."""
    access_token: EnvSecret
    """The token NapCat's websocket is set up with (``env:NAPCAT_TOKEN``); sent or checked as ``Bearer``."""
    self_id: str | None = Field(default=None, pattern=r"^[1-9][0-9]{4,11}$")
    """The bot's QQ number; when set, a NapCat logged in as another account is refused."""
    action_timeout_s: float = Field(default=15.0, gt=0)
    """How long an action (a send) waits for its echoed answer before it counts as lost."""

    @model_validator(mode="before")
    @classmethod
    def _opted_in(cls, data: object) -> object:
        if isinstance(data, dict) and data.get(OPT_IN) is not True:
            raise ValueError(f"napcat is off until you set `{OPT_IN}: true` in this account: {RISK}")
        return data

    @field_validator("ws_url")
    @classmethod
    def _websocket(cls, value: str) -> str:
        if not value.startswith(("ws://", "wss://")):
            raise ValueError("ws_url is NapCat's websocket server, ws://host:port (WebUI → Network → Websocket server)")
        return value

    @field_validator("access_token")
    @classmethod
    def _token_set(cls, value: object) -> object:
        secret = getattr(value, "get_secret_value", lambda: value)()
        if not str(secret).strip():
            raise ValueError("access_token is empty: set the same token in NapCat's websocket settings and here")
        return value
