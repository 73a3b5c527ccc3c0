"""The Zulip channel: a bot on Zulip's event queue (register, long-poll ``events``), answering over REST.

Imported only when an account of it is configured: the registry lists it from
``channels/platforms.toml``.  Plain httpx on the kit's long-poll loop, no SDK
(docs/adr/0048-zulip-channel.md).
"""

from channels.zulip.channel import ZulipChannel
from channels.zulip.config import ZulipConfig

__all__ = ["ZulipChannel", "ZulipConfig"]
