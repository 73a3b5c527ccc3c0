"""The Slack channel (slack-bolt): Socket Mode or the Events API, native streams, assistant threads, files.

Imported only when an account of it is configured: the registry lists it from
``channels/platforms.toml`` without importing slack-bolt.  See channel.py for
the delivery rules and docs/adr/0028-slack-channel.md for the choices.
"""

from channels.slack.channel import SlackChannel
from channels.slack.config import SlackConfig

__all__ = ["SlackChannel", "SlackConfig"]
