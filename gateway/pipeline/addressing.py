"""What a message says to the bot, once the way it was addressed is set aside.

Channels decode faithfully: "@tutor_bot /export" arrives as a mention of the
bot followed by the text " /export", the separator kept.  Everything after
dispatch -- commands (``/start``, ``/stop``, ``/export``...), the teacher's
commands, the model's input -- wants what was *said*: "/export".  So the
dispatcher, for every channel alike, drops a leading mention of the bot (and
the separator after it) before anything reads the text; whether the bot was
addressed is already recorded in ``InboundMessage.addressed``.  A mention
anywhere else stays: "ask @tutor_bot about it" means what it says.

A message that shows nothing -- no media and no visible character, only
zero-width spaces, joiners, bidi marks, control characters or lone combining
marks (:mod:`gateway.visible`) -- is not a question and costs no turn: the
dispatcher drops it with :data:`NOTHING_VISIBLE` as the recorded reason.
"""

from __future__ import annotations

import re

from gateway.messages import (
    Element,
    InboundMessage,
    Media,
    Mention,
    Quote,
    Text,
    plain_text,
)
from gateway.visible import has_visible

NOTHING_VISIBLE = "nothing visible in the message"
_SEPARATOR = re.compile(r"^\s*(?:[,:](?=\s|$))?\s*")
"""What may stand between a leading "@bot" and what is said to it: "@bot hi", "@bot, hi", "Tutor: hi"."""


def says_nothing(message: InboundMessage) -> bool:
    """Whether the message has nothing a reader could see: no media, no visible character."""
    return not any(isinstance(e, Media) for e in message.elements) and not has_visible(message.text)


def without_leading_mention(message: InboundMessage) -> InboundMessage:
    """The message with a leading mention of the bot (and its separator) removed.

    Quotes come first in some decodes and are not text, so the mention is looked
    for after them.  A message that is *only* a mention of the bot keeps it: a
    bare "@tutor_bot" is a call for attention, not an empty message."""
    elements = list(message.elements)
    start = next((i for i, e in enumerate(elements) if not isinstance(e, Quote)), len(elements))
    rest = elements[start:]
    removed = False
    while rest and isinstance(rest[0], Mention) and rest[0].is_self:
        rest = _strip_separator(rest[1:])
        removed = True
    if not removed or not any(isinstance(e, Media) for e in rest) and not has_visible(plain_text(rest)):
        return message
    return message.model_copy(update={"elements": (*elements[:start], *rest)})


def _strip_separator(elements: list[Element]) -> list[Element]:
    while elements and isinstance(elements[0], Text):
        text = _SEPARATOR.sub("", elements[0].text, count=1)
        if text:
            return [Text(text=text), *elements[1:]]
        elements = elements[1:]
    return elements

