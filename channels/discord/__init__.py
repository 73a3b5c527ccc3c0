"""The Discord channel (discord.py >= 2.4): the Gateway with intents, slash commands, threads, edits in place.

Imported only when an account of it is configured: the registry lists it from
``channels/platforms.toml`` without importing discord.py.
"""

from channels.discord.channel import DiscordChannel
from channels.discord.config import DiscordConfig

__all__ = ["DiscordChannel", "DiscordConfig"]
