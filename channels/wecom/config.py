"""WeCom account settings: which way the bot is reached, as a union tagged by ``kind``.

WeCom has two ways in.  The AI bot (智能机器人) holds a long connection the
gateway dials out with the bot's id and secret -- nothing to expose to the
internet, so it is the default and, today, the only one implemented.  A
self-built app (自建应用) posts encrypted XML callbacks instead; it will be a
second member of :data:`WecomMode` with its own fields, and an account names
it by ``kind``.  An account asking for a kind this release does not have is
refused at config time with words that say so, not at the first message.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.core.config import AccountConfig, EnvSecret

CLOUD_WS = "wss://openws.work.weixin.qq.com"
KINDS = ("ai_bot",)


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


WecomMode = Annotated[Union[AiBotMode], Field(discriminator="kind")]  # noqa: UP007 - a one-member union is still tagged
"""Every way in; one member today (see the module docstring)."""


class WecomConfig(AccountConfig):
    mode: WecomMode
    connect_timeout_s: float = Field(default=15.0, gt=0)
    """How long ``run`` waits for the subscribe to be answered before the account counts as failed."""
    heartbeat_s: float = Field(default=30.0, gt=0)
    """How often the SDK pings; two pings unanswered close the connection (a drop, reconnected by the supervisor)."""

    @model_validator(mode="before")
    @classmethod
    def _known_kind(cls, data: Any) -> Any:
        """Default the kind to the AI bot, and refuse another kind in plain words."""
        if isinstance(data, dict) and isinstance(data.get("mode"), dict):
            mode = dict(data["mode"])
            kind = mode.setdefault("kind", "ai_bot")
            if kind not in KINDS:
                raise ValueError(f"wecom mode kind {str(kind)[:40]!r} is not available in this release; "
                                 f"use kind: ai_bot (the AI bot long connection)")
            data = {**data, "mode": mode}
        return data

    @property
    def ai_bot(self) -> AiBotMode:
        return self.mode
