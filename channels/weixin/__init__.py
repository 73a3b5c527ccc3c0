"""WeChat: personal WeChat through iLink (``kind: ilink``, the default) and Official Accounts (``kind: official_account``)."""

from channels.weixin.account import WeixinChannel

__all__ = ["WeixinChannel"]
