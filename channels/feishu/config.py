"""Feishu / Lark account settings: the app's credentials, which cloud, and which way events come in.

Every value is on the developer console's app page: the App ID and App Secret under *Credentials &
Basic Info*, the Encrypt Key and Verification Token under *Events & Callbacks → Encryption Strategy*.
Feishu (open.feishu.cn) and Lark (open.larksuite.com, the international cloud) are the same API on two
domains; ``domain`` picks one, or names a test peer.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gateway.core.config import AccountConfig, EnvSecret

DOMAINS = {"feishu": "https://open.feishu.cn", "lark": "https://open.larksuite.com"}


class FeishuConfig(AccountConfig):
    app_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    """The app's App ID (``cli_...``)."""
    app_secret: EnvSecret
    """The App Secret, read from the environment (``env:NAME``); it gets the tenant access token, never logged."""
    domain: str = "feishu"
    """``feishu`` (open.feishu.cn), ``lark`` (open.larksuite.com, outside China), or a base URL (a test peer)."""
    inbound: Literal["socket", "webhook"] = "socket"
    """``socket``: the SDK's long connection, nothing exposed to the internet (the default).  ``webhook``:
    Feishu POSTs events to ``/webhooks/feishu/<account>`` (a public HTTPS URL is needed)."""
    encrypt_key: EnvSecret | None = None
    """The Encrypt Key: webhook bodies are AES-encrypted with it and signed (``X-Lark-Signature``)."""
    verification_token: EnvSecret | None = None
    """The Verification Token every webhook event (and the URL check) carries."""
    stream: bool = True
    """Show answers as they are written, on a CardKit streaming card; ``false`` sends the final text only."""
    reply_in_thread: bool = False
    """In groups, answer in a thread under the learner's message (a message already in a thread is
    always answered there)."""
    connect_timeout_s: float = Field(default=15.0, gt=0)
    """How long ``run`` waits for the long connection before the account counts as failed."""

    @model_validator(mode="after")
    def _webhook_is_authenticated(self) -> FeishuConfig:
        if self.inbound == "webhook" and self.encrypt_key is None and self.verification_token is None:
            raise ValueError("a feishu webhook needs encrypt_key or verification_token (both, ideally): "
                             "without them anyone could post events as Feishu")
        return self

    @property
    def api_base(self) -> str:
        return DOMAINS.get(self.domain, self.domain).rstrip("/")
