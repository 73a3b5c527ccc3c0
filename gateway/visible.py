"""Whether a piece of text shows anything to a reader.

Both directions need the same answer.  Inbound, a message of only zero-width
spaces, bidi marks or control characters says nothing and must not cost a
turn; outbound, a reply that renders to nothing visible must not be marked
delivered with nothing sent.  ``str.strip()`` is not that test: it keeps
U+200B, U+FEFF, U+2060 and every other format character, which chat apps
then show as an empty bubble or refuse with "message text is empty".

Invisible here: whitespace and separators (Z*), control (Cc), format (Cf:
zero-width space and joiners, BOM, bidi marks and isolates, tag characters),
surrogates (Cs), and combining marks (Mn, Me) -- a mark with no base letter
is at best a dotted circle.  Plus the few letters and symbols that render as
blank space (the Hangul fillers and the braille blank), a known way to send
"nothing" past a check on categories alone.  Private-use and unassigned code
points stay visible: they render as a glyph or a box.
"""

from __future__ import annotations

import unicodedata

_INVISIBLE_CATEGORIES = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Mn", "Me"})
_BLANK_GLYPHS = frozenset({"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800"})


def is_visible_char(ch: str) -> bool:
    """Whether one code point draws something on its own."""
    return ch not in _BLANK_GLYPHS and unicodedata.category(ch) not in _INVISIBLE_CATEGORIES


def has_visible(text: str) -> bool:
    """Whether ``text`` shows a reader anything at all."""
    return any(is_visible_char(ch) for ch in text)
