"""The brain: one persona-aware agent loop shared by every partner and channel.

It knows the message vocabulary (``gateway.messages``, ``gateway.events``,
``gateway.turns``) and never a platform.
"""
