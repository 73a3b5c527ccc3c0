"""WhatsApp: the WhatsApp Business Cloud API (Meta's Graph), by signed webhook -- one-to-one chats with learners."""

from channels.whatsapp.channel import WhatsappChannel

__all__ = ["WhatsappChannel"]
