"""The Feishu / Lark channel: a self-built app's bot, reached over the long connection (lark-oapi, the
default) or the event webhook, answering with rich text and CardKit streaming cards.

Imported only when an account of it is configured: the registry lists it from ``channels/platforms.toml``
without importing the SDK.  See channel.py for the delivery rules and docs/adr/0042-feishu-channel.md.
"""

from channels.feishu.channel import FeishuChannel
from channels.feishu.config import FeishuConfig

__all__ = ["FeishuChannel", "FeishuConfig"]
