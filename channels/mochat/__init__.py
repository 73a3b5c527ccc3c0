"""The Mochat channel: a claw agent on Mochat's Socket.IO push (msgpack), with a long-poll fallback.

Imported only when an account of it is configured: the registry lists it from
``channels/platforms.toml`` without importing python-socketio.  See channel.py for
the delivery rules and docs/adr/0046-mochat-channel.md for the choices.
"""

from channels.mochat.channel import MochatChannel
from channels.mochat.config import MochatConfig

__all__ = ["MochatChannel", "MochatConfig"]
