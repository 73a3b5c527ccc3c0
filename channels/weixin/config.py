"""WeixinConfig: one WeChat account, of one of the platform's kinds, validated before anything connects.

WeChat reaches learners two ways, and an account says which with ``kind``:

- ``official_account``: a WeChat Official Account (公众号).  WeChat posts each
  learner's message to ``https://your-host/webhooks/weixin/<account>``, signed
  with the *Token* the teacher typed into the admin console, and encrypted in
  safe mode with the *EncodingAESKey*; answers go back in the callback or as
  customer-service messages with an ``access_token`` got from appid and
  appsecret.
- ``ilink`` (the default): personal WeChat through Tencent's iLink bot API.
  The teacher scans a QR code with the WeChat that will speak
  (``partners channels login weixin ACCOUNT``); the bot token and the base URL
  that login hands back live in the gateway's store, never in this file.  The
  gateway long-polls ``ilink/bot/getupdates`` and answers with
  ``ilink/bot/sendmessage``.

The settings are a union told apart by ``kind`` (pydantic's discriminated
form, dispatched from :class:`WeixinConfig` so the channel has one
``config_model``): a new kind is one more model and one more row in
:data:`KINDS`, and no existing account's file changes.  The appsecret is read
from the environment (``env:NAME``) and never printed; so is the token.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, ModelWrapValidatorHandler, model_validator

from channels._kit.msgcrypt import ENCODING_AES_KEY_CHARS
from gateway.core.config import AccountConfig, EnvSecret

API_BASE = "https://api.weixin.qq.com/"
ILINK_BASE = "https://ilinkai.weixin.qq.com/"
ILINK_CDN = "https://novac2c.cdn.weixin.qq.com/c2c/"
DEFAULT_KIND = "ilink"
NOT_YET: dict[str, str] = {}
"""Kinds the platform has and this release does not: refused with these words when the config loads."""
OA_FIELDS = frozenset({"appid", "appsecret", "token", "encoding_aes_key", "mode"})
"""Settings only an Official Account has: a file naming them without a ``kind`` is told which kind to write."""


class WeixinConfig(AccountConfig):
    """Any WeChat account: validating this model validates the row of ``kind`` (see :data:`KINDS`)."""

    kind: str = DEFAULT_KIND
    KIND: ClassVar[str] = ""

    @model_validator(mode="wrap")
    @classmethod
    def _by_kind(cls, data: Any, handler: ModelWrapValidatorHandler[WeixinConfig]) -> WeixinConfig:
        if cls is not WeixinConfig or not isinstance(data, dict):
            return handler(data)
        if "kind" not in data and OA_FIELDS & data.keys():
            raise ValueError(f"this looks like an Official Account: write kind: official_account "
                             f"(an account without kind is personal WeChat, kind: {DEFAULT_KIND})")
        kind = str(data.get("kind", DEFAULT_KIND))
        if kind in NOT_YET:
            raise ValueError(NOT_YET[kind])
        model = KINDS.get(kind)
        if model is None:
            raise ValueError(f"kind: {kind[:40]!r} is not a kind of WeChat account (known: {', '.join([*KINDS, *NOT_YET])})")
        return model.model_validate(data)


class OfficialAccountConfig(WeixinConfig):
    """A WeChat Official Account, as its admin console (*Settings and Development → Basic configuration*) shows it."""

    KIND: ClassVar[str] = "official_account"
    kind: Literal["official_account"] = "official_account"
    appid: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    """The AppID (开发者ID), ``wx`` and 16 letters on a real account."""
    appsecret: EnvSecret
    """The AppSecret (开发者密码), which gets the ``access_token`` for customer-service messages."""
    token: EnvSecret
    """The Token typed into *Server configuration* (服务器配置): WeChat signs every callback with it."""
    encoding_aes_key: EnvSecret | None = None
    """The EncodingAESKey (消息加解密密钥), 43 letters and digits; needed in compatible and safe mode."""
    mode: Literal["plaintext", "compatible", "safe"] = "safe"
    """The message encryption mode (消息加解密方式) chosen in the console: 明文, 兼容 or 安全."""
    passive_reply: bool = True
    """Answer in the callback's own response when the answer is ready in time (``passive_reply_s``)."""
    api_base: str = API_BASE
    """Where ``cgi-bin/token`` and ``cgi-bin/message/custom/send`` live (a test peer, or a proxy)."""

    @model_validator(mode="after")
    def _check(self) -> OfficialAccountConfig:
        key = self.encoding_aes_key.get_secret_value() if self.encoding_aes_key is not None else None
        if self.mode != "plaintext" and key is None:
            raise ValueError(f"{self.mode} mode needs encoding_aes_key (env:NAME holding the 43-character EncodingAESKey)")
        if key is not None and (len(key) != ENCODING_AES_KEY_CHARS or not key.isalnum()):
            raise ValueError(f"encoding_aes_key must be the {ENCODING_AES_KEY_CHARS} letters and digits the console shows "
                             f"(this one has {len(key)} characters)")
        if not self.api_base.endswith("/"):
            object.__setattr__(self, "api_base", self.api_base + "/")
        return self


class IlinkConfig(WeixinConfig):
    """Personal WeChat through the iLink bot API: almost nothing to write, because the QR login brings the rest.

    The bot token and the base URL the login returns are runtime secrets kept in the gateway's store
    (:mod:`channels.weixin.session`); this file names only where to log in and, optionally, which bot."""

    KIND: ClassVar[str] = "ilink"
    kind: Literal["ilink"] = "ilink"
    base_url: str = ILINK_BASE
    """Where the QR login starts (a test peer, or a proxy).  The login may hand back another base URL for the
    bot's own calls; that one is stored with the token and wins."""
    bot_id: str | None = Field(default=None, min_length=1, max_length=128)
    """The ``ilink_bot_id`` this account must be; a login or a stored session for another bot is refused."""
    cdn_base_url: str = ILINK_CDN
    """Where the learners' images and files are downloaded from (encrypted; a test peer, or a proxy)."""
    poll_timeout_s: float = Field(default=35.0, gt=0, le=60)
    """How long one ``getupdates`` may be held open by the platform (it holds about 35 s); at most 60, so a
    held poll never looks like a stalled account to the supervisor's watchdog."""

    @model_validator(mode="after")
    def _slash(self) -> IlinkConfig:
        for name in ("base_url", "cdn_base_url"):
            if not getattr(self, name).endswith("/"):
                object.__setattr__(self, name, getattr(self, name) + "/")
        return self


KINDS: dict[str, type[WeixinConfig]] = {OfficialAccountConfig.KIND: OfficialAccountConfig, IlinkConfig.KIND: IlinkConfig}
"""The kinds this release runs, by ``kind``."""
