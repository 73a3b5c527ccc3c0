"""From the brain's Markdown to platform-ready message parts.

The one entry point is :func:`render_reply`: parse the reply once
(:mod:`.markdown`), render it in the channel's dialect (:mod:`.dialects`) and
split it to the channel's text limit in the channel's unit (:mod:`.split`).
:func:`degrade` applies the written degradation rules to message elements a
platform cannot show (:mod:`.degrade`).  Channels never split or escape text
themselves; they send the parts they are given, in order.
"""

from __future__ import annotations

from gateway.core.capabilities import ChannelCapabilities, Dialect
from gateway.core.messages import has_visible
from gateway.render.degrade import degrade
from gateway.render.dialects import render_blocks, renderer_for
from gateway.render.markdown import block_text, parse
from gateway.render.split import MIN_LIMIT, measure, split_blocks

__all__ = ["MIN_LIMIT", "degrade", "measure", "render_markdown", "render_reply"]


def render_reply(markdown: str, caps: ChannelCapabilities) -> list[str]:
    """Render ``markdown`` for a channel as parts, each within ``caps.text_limit`` ``caps.text_unit``s.

    Returns ``[]`` when the reply has nothing visible (empty, whitespace, control
    or format characters such as U+200B, only link definitions or a rule; see
    :func:`gateway.core.messages.has_visible`): whether to send nothing or a placeholder is the
    caller's policy, not the renderer's.  Otherwise every part is non-empty valid markup
    in ``caps.dialect``.  Raises ``ValueError`` if ``caps.text_limit`` is below
    :data:`MIN_LIMIT`.
    """
    blocks = parse(markdown)
    if not any(has_visible(block_text(block)) for block in blocks):
        return []
    return split_blocks(blocks, renderer_for(caps.dialect), caps.text_limit, caps.text_unit)


def render_markdown(markdown: str, dialect: Dialect) -> str:
    """Render ``markdown`` in ``dialect`` as one string, unsplit (stream previews, logs)."""
    return render_blocks(parse(markdown), dialect)
