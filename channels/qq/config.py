"""QQConfig: one QQ bot, as the QQ open platform (q.qq.com) shows it, validated before anything connects.

QQ posts each event to ``https://your-host/webhooks/qq/<account>``, signed
with an Ed25519 key seeded from the bot's *AppSecret* (Q2) -- ``mode: webhook``,
the default, and the only way QQ keeps.  ``mode: websocket`` dials QQ's
websocket gateway instead (no public URL), for a bot QQ still serves there:
QQ announced its retirement in favour of webhooks (ADR 0044).  Answers go to
QQ's OpenAPI with an access token got from *AppID* and *AppSecret*.  The
secret is read from the environment (``env:NAME``) and never printed.

``api_base`` and ``token_url`` are settings so a test peer (or a proxy) can
stand in for QQ; ``sandbox: true`` points ``api_base`` at QQ's sandbox
OpenAPI, where only the sandbox members the teacher listed can talk to the bot.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gateway.core.config import AccountConfig, EnvSecret

API_BASE = "https://api.sgroup.qq.com/"
SANDBOX_API_BASE = "https://sandbox.api.sgroup.qq.com/"
TOKEN_URL = "https://bots.qq.com/app/getAppAccessToken"


class QQConfig(AccountConfig):
    """A QQ bot: *Development → Development settings* (开发设置) on q.qq.com."""

    app_id: str = Field(min_length=1, max_length=32, pattern=r"^[0-9]+$")
    """The bot's AppID (机器人ID), digits."""
    app_secret: EnvSecret
    """The AppSecret (机器人密钥): it seeds the webhook signing key and gets the access token."""
    mode: Literal["webhook", "websocket"] = "webhook"
    """How QQ hands the bot its events: ``webhook`` (QQ posts to the gateway's HTTPS address) or ``websocket``
    (the gateway dials QQ's websocket gateway, where QQ still offers it; no callback address may be set then)."""
    sandbox: bool = False
    """Talk to QQ's sandbox OpenAPI (沙箱环境) instead of the live one, while the bot is not yet published."""
    api_base: str = ""
    """Where ``/v2/users/.../messages`` and friends live; empty: QQ's own (or its sandbox, with ``sandbox``)."""
    token_url: str = TOKEN_URL
    """Where ``getAppAccessToken`` is (a test peer, or a proxy)."""

    @model_validator(mode="after")
    def _base(self) -> QQConfig:
        base = self.api_base or (SANDBOX_API_BASE if self.sandbox else API_BASE)
        object.__setattr__(self, "api_base", base if base.endswith("/") else base + "/")
        return self
