"""The brain: one persona-aware agent loop shared by every partner and channel.

It knows the message vocabulary (``gateway.core.messages``, ``gateway.core.events``,
``gateway.core.turns``) and never a platform.
"""
