"""The DingTalk channel: an enterprise app's robot in Stream mode, answered in Markdown or an AI card.

Imported only when an account of it is configured: the registry lists it from
``channels/platforms.toml`` without importing dingtalk-stream.  See channel.py
for the delivery rules and docs/adr/0043-dingtalk-channel.md for the choices.
"""

from channels.dingtalk.channel import DingtalkChannel
from channels.dingtalk.config import DingtalkConfig

__all__ = ["DingtalkChannel", "DingtalkConfig"]
