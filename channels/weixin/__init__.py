"""WeChat: Official Accounts today (``kind: official_account``), personal WeChat through iLink to come."""

from channels.weixin.channel import WeixinChannel

__all__ = ["WeixinChannel"]
