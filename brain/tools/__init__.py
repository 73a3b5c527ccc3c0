"""Tools a partner's model may call, and which of them a turn may use.

- ``base``: :class:`~brain.tools.base.Tool`, its arguments, context and result.
- ``registry``: :class:`~brain.tools.registry.ToolRegistry` -- specs for the
  model, and one ``call`` that validates, scopes, times out and never raises.
- ``surface``: :func:`~brain.tools.surface.tool_surface` -- the partner's enabled
  tools minus what the conversation takes away, with a reason for each removal.
- ``builtin``: the house tools and ``default_registry``.

This package module imports nothing on purpose: ``surface`` depends only on
the message vocabulary and pydantic, so configuration code can import its
``ToolRule`` without pulling in the brain (and without an import cycle
through ``gateway.core.config``).
"""
