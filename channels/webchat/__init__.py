"""The built-in web chat channel: the learner chat page the gateway serves itself.

``channel`` is the Channel (send, edit, typing into per-session feeds),
``api`` the page and its HTTP API (loaded with Starlette only when served),
``feed`` the per-session Server-Sent Events backlog, ``static/`` the page.
"""

from channels.webchat.channel import WebchatChannel, WebchatConfig

__all__ = ["WebchatChannel", "WebchatConfig"]
