"""Where text may be cut, and how wide it looks in a monospace block.

A cut between a base letter and its combining accent, or inside a ZWJ emoji
family, shows the reader broken glyphs on both sides of the split.  These
rules follow UAX #29 (extended grapheme clusters) closely enough for chat text
without a dependency: CR LF, controls, Extend/SpacingMark, ZWJ + pictograph,
regional-indicator pairs and Hangul syllable sequences.  Prepend characters are
not handled (rare, and a cut before one is merely untidy).  Python strings hold
code points, so a cut can never land inside a UTF-16 surrogate pair or a UTF-8
sequence; these rules only add the cluster level on top.
"""

from __future__ import annotations

import unicodedata

ZWJ = "\u200d"
_ZWNJ = "\u200c"


def _is_control(ch: str) -> bool:
    if ch in (ZWJ, _ZWNJ):
        return False
    cat = unicodedata.category(ch)
    if cat == "Cf":
        return not 0xE0020 <= ord(ch) <= 0xE007F  # tag characters extend emoji flags
    return cat in ("Cc", "Zl", "Zp")


def _is_extend(ch: str) -> bool:
    cp = ord(ch)
    if ch in (ZWJ, _ZWNJ) or 0x1F3FB <= cp <= 0x1F3FF or 0xE0020 <= cp <= 0xE007F or cp in (0xFF9E, 0xFF9F):
        return True
    return unicodedata.category(ch) in ("Mn", "Me", "Mc")


def _is_pictographic(ch: str) -> bool:
    cp = ord(ch)
    return 0x1F000 <= cp <= 0x1FAFF or unicodedata.category(ch) == "So"


def _is_regional_indicator(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def _hangul_kind(ch: str) -> str:
    cp = ord(ch)
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return "L"
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return "V"
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return "T"
    if 0xAC00 <= cp <= 0xD7A3:
        return "LV" if (cp - 0xAC00) % 28 == 0 else "LVT"
    return ""


_HANGUL_JOINS = {
    ("L", "L"), ("L", "V"), ("L", "LV"), ("L", "LVT"), ("LV", "V"), ("LV", "T"), ("V", "V"), ("V", "T"), ("LVT", "T"),
    ("T", "T"),
}


def is_boundary(text: str, index: int) -> bool:
    """True when ``text`` may be cut before ``text[index]`` without splitting a cluster."""
    if index <= 0 or index >= len(text):
        return True
    prev, ch = text[index - 1], text[index]
    if prev == "\r" and ch == "\n":
        return False
    if _is_control(prev) or _is_control(ch):
        return True
    if _is_extend(ch):
        return False
    if prev == ZWJ and _is_pictographic(ch):
        return False
    if _is_regional_indicator(prev) and _is_regional_indicator(ch):
        run = 0
        while index - run - 1 >= 0 and _is_regional_indicator(text[index - run - 1]):
            run += 1
        return run % 2 == 0
    return (_hangul_kind(prev), _hangul_kind(ch)) not in _HANGUL_JOINS


def boundary_at_or_before(text: str, index: int, floor: int) -> int:
    """The nearest cluster boundary at or before ``index`` but after ``floor``; ``floor`` if none."""
    while index > floor and not is_boundary(text, index):
        index -= 1
    return index


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospace font: wide East Asian = 2, marks = 0."""
    width = 0
    for ch in text:
        if _is_extend(ch) or unicodedata.category(ch) == "Cf":
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width
