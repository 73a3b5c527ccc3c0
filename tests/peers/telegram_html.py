"""Telegram's HTML ``parse_mode``, as the Bot API checks it: markup in, plain text and entities out.

Written from the Bot API's "HTML style" section: only the tags listed there
are accepted, only ``&lt; &gt; &amp; &quot;`` and numeric entities are
decoded, every tag must be closed in order, and a message is measured *after*
parsing, in UTF-16 code units.  Anything else is refused the way the Bot API
refuses it -- ``Bad Request: can't parse entities: ...`` -- so a channel's
fallback for bad markup has something real to fall back from.
"""

from __future__ import annotations

import re

TAG_ENTITY = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline", "ins": "underline",
    "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough", "tg-spoiler": "spoiler",
    "span": "spoiler", "a": "text_link", "code": "code", "pre": "pre", "blockquote": "blockquote",
    "tg-emoji": "custom_emoji",
}
NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>]+))?)*)\s*>")
_ATTR = re.compile(r"([a-zA-Z-]+)(?:\s*=\s*(?:\"([^\"]*)\"|'([^']*)'|([^\s>]+)))?")
_ENTITY = re.compile(r"&(#x[0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);")


class EntityError(ValueError):
    """The Bot API's 400 for markup it cannot parse."""


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _decode_entity(match: re.Match[str]) -> str:
    name = match.group(1)
    if name.startswith("#x"):
        return chr(int(name[2:], 16))
    if name.startswith("#"):
        return chr(int(name[1:]))
    return NAMED.get(name, match.group(0))  # unknown named entities stay as written


def parse_html(markup: str) -> tuple[str, list[dict]]:
    """Return (plain text, entities with UTF-16 offsets) or raise EntityError with the API's wording."""
    out: list[str] = []
    entities: list[dict] = []
    stack: list[tuple[str, int, dict]] = []
    length = 0
    position = 0
    while position < len(markup):
        lt = markup.find("<", position)
        chunk = markup[position:] if lt < 0 else markup[position:lt]
        if chunk:
            text = _ENTITY.sub(_decode_entity, chunk)
            out.append(text)
            length += utf16_len(text)
        if lt < 0:
            break
        offset = len(markup[:lt].encode("utf-8"))
        match = _TAG.match(markup, lt)
        if match is None:
            raise EntityError(f"can't parse entities: Unclosed start tag at byte offset {offset}")
        closing, name, attrs = match.group(1) == "/", match.group(2).lower(), match.group(3)
        if name not in TAG_ENTITY:
            raise EntityError(f'can\'t parse entities: Unsupported start tag "{name}" at byte offset {offset}')
        if closing:
            if not stack or stack[-1][0] != name:
                expected = f'"</{stack[-1][0]}>"' if stack else "nothing"
                raise EntityError(f'can\'t parse entities: Unmatched end tag at byte offset {offset}, '
                                  f'expected {expected}, found "</{name}>"')
            tag, start, extra = stack.pop()
            if length > start:
                entities.append({"type": TAG_ENTITY[tag], "offset": start, "length": length - start, **extra})
        else:
            extra = {k: _ENTITY.sub(_decode_entity, v1 or v2 or v3 or "") for k, v1, v2, v3 in _ATTR.findall(attrs)}
            if name == "a":
                if not extra.get("href"):
                    raise EntityError(f"can't parse entities: Can't find href in a tag at byte offset {offset}")
                extra = {"url": extra["href"]}
            elif name == "span" and extra.get("class") != "tg-spoiler":
                raise EntityError(f'can\'t parse entities: Unsupported start tag "span" at byte offset {offset}')
            else:
                extra = {}
            stack.append((name, length, extra))
        position = match.end()
    if stack:
        raise EntityError(f'can\'t parse entities: Can\'t find end tag corresponding to start tag "{stack[-1][0]}"')
    return "".join(out), sorted(entities, key=lambda e: (e["offset"], -e["length"]))
