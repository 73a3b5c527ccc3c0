"""WeCom account settings: which way the bot is reached, as a union tagged by ``kind``.

WeCom has two ways in.  The AI bot (智能机器人, ``kind: ai_bot``, the default)
holds a long connection the gateway dials out with the bot's id and secret --
nothing to expose to the internet.  A self-built app (自建应用, ``kind: app``)
posts encrypted XML callbacks to the gateway's webhook route instead, and is
answered with ``cgi-bin/message/send`` under an ``access_token`` got from the
corpid and the app's secret.  An account asking for a kind this release does
not have is refused at config time with words that say so, not at the first
message.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from channels._kit.msgcrypt import ENCODING_AES_KEY_CHARS
from gateway.core.config import AccountConfig, EnvSecret

CLOUD_WS = "wss://openws.work.weixin.qq.com"
API_BASE = "https://qyapi.weixin.qq.com/"
KINDS = ("ai_bot", "app")


class AiBotMode(BaseModel):
    """The AI bot's long connection: subscribe with the bot id and its secret (both from the admin console)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["ai_bot"] = "ai_bot"
    bot_id: str = Field(min_length=1)
    """The bot's id (BotID), shown on the bot's page under API mode → long connection."""
    secret: EnvSecret
    """The bot's secret, read from the environment (``env:NAME``); never logged."""
    ws_url: str = CLOUD_WS
    """Where the long connection goes: WeCom's own server, or a loopback emulator in tests."""


class AppMode(BaseModel):
    """A self-built app (自建应用): its callback settings and the secret that gets the ``access_token``.

    Every value is on the WeCom admin console: the corpid under *My company*
    (我的企业), the AgentId and Secret on the app's page, Token and
    EncodingAESKey under the app's *Receive messages → Set API receive*
    (接收消息 → 设置API接收)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["app"]
    corpid: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    """The company's id (企业ID, ``ww`` and 16 hex digits): the receive id inside every encrypted callback."""
    corpsecret: EnvSecret
    """The app's Secret, read from the environment (``env:NAME``); it gets the ``access_token`` and is never logged."""
    agentid: int = Field(gt=0)
    """The app's AgentId: which app ``message/send`` speaks as."""
    token: EnvSecret
    """The Token typed into the API receive settings: every callback's ``msg_signature`` is made with it."""
    encoding_aes_key: EnvSecret
    """The 43-character EncodingAESKey from the same settings: every callback and ``echostr`` is encrypted with it."""
    api_base: str = API_BASE
    """Where ``cgi-bin/gettoken`` and ``cgi-bin/message/send`` live (a test peer, or a proxy)."""

    @model_validator(mode="after")
    def _check(self) -> AppMode:
        key = self.encoding_aes_key.get_secret_value()
        if len(key) != ENCODING_AES_KEY_CHARS or not key.isalnum():
            raise ValueError(f"encoding_aes_key must be the {ENCODING_AES_KEY_CHARS} letters and digits the console shows "
                             f"(this one has {len(key)} characters)")
        if not self.api_base.endswith("/"):
            object.__setattr__(self, "api_base", self.api_base + "/")
        return self


WecomMode = Annotated[Union[AiBotMode, AppMode], Field(discriminator="kind")]  # noqa: UP007 - pydantic's tagged form
"""Every way in (see the module docstring)."""


class WecomConfig(AccountConfig):
    mode: WecomMode
    connect_timeout_s: float = Field(default=15.0, gt=0)
    """How long ``run`` waits for the subscribe to be answered before the account counts as failed."""
    heartbeat_s: float = Field(default=30.0, gt=0)
    """How often the SDK pings; two pings unanswered close the connection (a drop, reconnected by the supervisor)."""
    stream_limit_s: float | None = Field(default=None, gt=0)
    """How long after the learner's message WeCom still takes updates to its answer's stream; None: the
    platform's (``reply_token_lifetime_s`` in platforms.toml, 6 min).  Set only for a test peer, or if WeCom
    changes the limit before a release does."""
    stream_margin_s: float = Field(default=30.0, ge=0)
    """How long before that limit the channel finishes a stream still open itself, and sends the rest of the
    answer as a message to the chat, so no update arrives after WeCom stopped taking them."""

    @model_validator(mode="before")
    @classmethod
    def _known_kind(cls, data: Any) -> Any:
        """Default the kind to the AI bot, and refuse another kind in plain words."""
        if isinstance(data, dict) and isinstance(data.get("mode"), dict):
            mode = dict(data["mode"])
            kind = mode.setdefault("kind", "ai_bot")
            if kind not in KINDS:
                raise ValueError(f"wecom mode kind {str(kind)[:40]!r} is not available in this release; "
                                 f"use kind: ai_bot (the AI bot long connection) or kind: app (a self-built app)")
            data = {**data, "mode": mode}
        return data

    @model_validator(mode="after")
    def _margin_inside_limit(self) -> WecomConfig:
        if self.stream_limit_s is not None and self.stream_margin_s >= self.stream_limit_s:
            raise ValueError(f"stream_margin_s ({self.stream_margin_s:g}) must be shorter than stream_limit_s "
                             f"({self.stream_limit_s:g}): the stream is finished that long before the limit")
        return self

    @property
    def kind(self) -> str:
        """The kind of account, which picks its channel class and its row in platforms.toml."""
        return self.mode.kind

    @property
    def ai_bot(self) -> AiBotMode:
        if not isinstance(self.mode, AiBotMode):
            raise TypeError("this WeCom account is not an AI bot")
        return self.mode

    @property
    def app(self) -> AppMode:
        if not isinstance(self.mode, AppMode):
            raise TypeError("this WeCom account is not a self-built app")
        return self.mode
