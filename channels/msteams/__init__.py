"""Microsoft Teams through the Bot Framework: signed webhook in, Bot Connector REST out (ADR 0050)."""

from channels.msteams.channel import MsteamsChannel

__all__ = ["MsteamsChannel"]
