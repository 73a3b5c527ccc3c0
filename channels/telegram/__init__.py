"""The Telegram channel (python-telegram-bot >= 22): long polling or webhook, drafts, topics, media.

Imported only when an account of it is configured: the registry lists it from
``channels/platforms.toml`` without importing python-telegram-bot.
"""

from channels.telegram.channel import TelegramChannel
from channels.telegram.config import TelegramConfig

__all__ = ["TelegramChannel", "TelegramConfig"]
