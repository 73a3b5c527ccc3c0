"""DingTalk account settings: one enterprise app (企业内部应用) with the robot capability.

The robot hears its messages in Stream mode (``mode: stream``, the default: the
gateway dials out, no public URL) or by HTTP callback (``mode: http``: DingTalk
POSTs each message to ``<public_url>/webhooks/dingtalk/<account>``, signed with
the Client Secret), as the console's *Robot → message receiving mode* says.

Every value is on the DingTalk developer console (open-dev.dingtalk.com): the
Client ID (AppKey) and Client Secret (AppSecret) under *Credentials and basic
info*; the robot code is the Client ID unless the console shows another; the AI
card template id under *Card platform* (卡片平台), when the app streams answers
into a card.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gateway.core.config import AccountConfig, EnvSecret

API_BASE = "https://api.dingtalk.com"


class DingtalkConfig(AccountConfig):
    client_id: str = Field(min_length=1, max_length=128)
    """The app's Client ID (AppKey): opens the stream and gets the access token."""
    client_secret: EnvSecret
    """The app's Client Secret (AppSecret), read from the environment (``env:NAME``); never logged."""
    mode: Literal["stream", "http"] = "stream"
    """How DingTalk hands the robot its messages: ``stream`` (a websocket the gateway opens; no public URL)
    or ``http`` (DingTalk POSTs to the gateway's webhook URL, which must be reachable from the internet)."""
    robot_code: str = ""
    """Which robot speaks in proactive sends and cards; empty means the Client ID (what the console shows)."""
    card_template_id: str = ""
    """An AI card template (卡片平台) with a streaming text variable: answers stream into the card.
    Empty: answers are sent once, complete, as Markdown."""
    card_content_key: str = Field(default="content", min_length=1)
    """The template's variable the streamed text goes to."""
    api_base: str = API_BASE
    """Where DingTalk's open API lives (the stream ticket, the token, sends, cards): a test peer or a proxy."""
    connect_timeout_s: float = Field(default=10.0, gt=0)
    """How long opening the stream's websocket may take before it counts as a failed attempt."""
    request_timeout_s: float = Field(default=15.0, gt=0)
    """How long one API call may take."""

    @model_validator(mode="after")
    def _defaults(self) -> DingtalkConfig:
        if not self.robot_code:
            object.__setattr__(self, "robot_code", self.client_id)
        object.__setattr__(self, "api_base", self.api_base.rstrip("/"))
        return self

    @property
    def streams_cards(self) -> bool:
        return bool(self.card_template_id)
