"""From the brain's Markdown to platform-ready message parts.

The entry points are :func:`render_reply` and :func:`render_twins`: parse the
reply once (:mod:`.markdown`), render it in the channel's dialect
(:mod:`.dialects`) and split it to the channel's text limit in the channel's
unit (:mod:`.split`).  :func:`render_twins` also renders each part's blocks as
plain text -- the one Markdown-to-text path, so no channel re-parses its own
markup to make a plain body.
:func:`degrade` applies the written degradation rules to message elements a
platform cannot show (:mod:`.degrade`).  Channels never split or escape text
themselves; they send the parts they are given, in order.
"""

from __future__ import annotations

from typing import NamedTuple

from gateway.core.capabilities import ChannelCapabilities, Dialect
from gateway.core.messages import has_visible
from gateway.render.degrade import degrade
from gateway.render.dialects import PlainRenderer, render_blocks, renderer_for
from gateway.render.markdown import block_text, parse
from gateway.render.split import MIN_LIMIT, measure, split_blocks, split_groups

__all__ = ["MIN_LIMIT", "Twin", "degrade", "measure", "render_markdown", "render_reply", "render_twins"]


class Twin(NamedTuple):
    """One part of a reply in the channel's dialect and as plain text, from the same blocks."""

    text: str
    plain: str


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


def render_twins(markdown: str, caps: ChannelCapabilities) -> list[Twin]:
    """:func:`render_reply`'s parts, each with its plain-text twin rendered from the same blocks.

    The dialect text is within the limit; the twin is what a reader sees of it (links as
    "text (url)", tables as aligned columns), which can run a few characters longer than
    markup that hides a URL in an attribute."""
    blocks = parse(markdown)
    if not any(has_visible(block_text(block)) for block in blocks):
        return []
    renderer, plain = renderer_for(caps.dialect), PlainRenderer()
    twins = []
    for group in split_groups(blocks, renderer, caps.text_limit, caps.text_unit):
        text = renderer.render(group)
        if text.strip():
            twins.append(Twin(text, plain.render(group) if caps.dialect is not Dialect.PLAIN else text))
    return twins
