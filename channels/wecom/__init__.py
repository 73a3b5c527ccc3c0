"""The WeCom channel: the AI bot's long connection (wecom-aibot-sdk, answers as native streams), or a
self-built app's encrypted callbacks answered with app messages (``kind: app``, app.py).

Imported only when an account of it is configured: the registry lists it from
``channels/platforms.toml`` without importing the SDK.  See channel.py for the
delivery rules and docs/adr/ (wecom-ai-bot-channel) for the choices.
"""

from channels.wecom.channel import WecomChannel
from channels.wecom.config import WecomConfig

__all__ = ["WecomChannel", "WecomConfig"]
