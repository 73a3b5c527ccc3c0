"""The WeCom channel (wecom-aibot-sdk): the AI bot's long connection, answers as native streams.

Imported only when an account of it is configured: the registry lists it from
``channels/platforms.toml`` without importing the SDK.  See channel.py for the
delivery rules and docs/adr/ (wecom-ai-bot-channel) for the choices.
"""

from channels.wecom.channel import WecomChannel
from channels.wecom.config import WecomConfig

__all__ = ["WecomChannel", "WecomConfig"]
