"""The email channel: IMAP IDLE in, SMTP out, one conversation per sender and thread (ADR 0011)."""

from channels.email.channel import EmailChannel
from channels.email.config import EmailConfig

__all__ = ["EmailChannel", "EmailConfig"]
