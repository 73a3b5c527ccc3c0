"""WeixinChannel: one WeChat account, whichever kind it is; constructing it gives the kind's own channel.

The registry knows one channel, ``weixin``, and one settings model
(:class:`~channels.weixin.config.WeixinConfig`, a union by ``kind``).  The
kinds share nothing on the wire -- an Official Account is a signed webhook,
personal WeChat a long poll -- so each is its own subclass, and
``WeixinChannel(context)`` returns the one the settings name.  The facts the
outbound path reads are the kind's row in platforms.toml (ADR 0033).
"""

from __future__ import annotations

from typing import ClassVar

from channels.base import Channel, ChannelContext
from channels.weixin.config import IlinkConfig, WeixinConfig
from gateway.core.capabilities import ChannelCapabilities, capabilities_of
from gateway.core.probes import Problem


def _kind_class(settings: WeixinConfig) -> type[WeixinChannel]:
    if isinstance(settings, IlinkConfig):
        from channels.weixin.ilink.channel import IlinkChannel

        return IlinkChannel
    from channels.weixin.channel import OfficialAccountChannel

    return OfficialAccountChannel


class WeixinChannel(Channel[WeixinConfig]):
    name: ClassVar[str] = "weixin"
    config_model = WeixinConfig

    def __new__(cls, context: ChannelContext[WeixinConfig]) -> WeixinChannel:
        chosen = _kind_class(context.config) if cls is WeixinChannel else cls
        return super().__new__(chosen)

    @classmethod
    def capabilities_for(cls, settings: WeixinConfig) -> ChannelCapabilities:
        return capabilities_of(cls.name, settings.kind)

    @classmethod
    def check(cls, settings: WeixinConfig) -> list[Problem]:
        chosen = _kind_class(settings)
        return chosen.check(settings) if chosen is not cls else []
