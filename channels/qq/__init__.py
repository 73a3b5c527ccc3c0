"""QQ: the official QQ bot API (q.qq.com) -- C2C chats, group @-messages and guild channels, by signed webhook."""

from channels.qq.channel import QQChannel

__all__ = ["QQChannel"]
