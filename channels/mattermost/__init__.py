"""The Mattermost channel: a bot account on the server's websocket events and its REST API v4.

Imported only when an account of it is configured: the registry lists it from
``channels/platforms.toml`` without importing websockets.  See channel.py for the
delivery rules and docs/adr/0047-mattermost-channel.md for the choices.
"""

from channels.mattermost.channel import MattermostChannel
from channels.mattermost.config import MattermostConfig

__all__ = ["MattermostChannel", "MattermostConfig"]
