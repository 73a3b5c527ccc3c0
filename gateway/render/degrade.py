"""Written degradation rules: what an element becomes where a platform cannot show it.

A channel declares the element kinds it shows (``ChannelCapabilities.elements``,
names from ``gateway.core.messages.ELEMENT_KINDS``).  Everything else is rewritten
here, once, by these rules -- so no channel invents its own fallback, and a
reader on any platform still gets the content:

============================  ==================================================
element the platform lacks    becomes
============================  ==================================================
styled ``Text``               its plain text (styles are shown by every dialect
                              except ``plain``)
``Mention``                   text "@name" (display name, else the user id)
``Link``                      text "text (url)", or just the url when the text
                              is empty or the url itself
``Media`` (image, audio, …)   a ``Link`` to its URL named by its name, caption
                              or kind (then the link rule, if links are out
                              too); without a URL, text "[image: name]"
``Quote``                     a "> quoted text" line, moved before the rest of
                              the message; dropped when it has no text
``Emoji`` (emoji / sticker)   its fallback text, else ":name:"
============================  ==================================================

Adjacent plain texts are merged, so a channel sends one run instead of many.
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.core.capabilities import ChannelCapabilities, Dialect
from gateway.core.messages import Element, Emoji, Link, Media, Mention, Quote, Text
from gateway.render.markdown import link_text


def degrade(elements: Iterable[Element], caps: ChannelCapabilities) -> tuple[Element, ...]:
    """Rewrite ``elements`` so every one is a kind ``caps`` shows, by the rules above."""
    quotes: list[Element] = []
    body: list[Element] = []
    for element in elements:
        if isinstance(element, Quote) and element.kind not in caps.elements:
            quotes.extend(_quote_lines(element))
        else:
            body.extend(_degrade_one(element, caps))
    return _merge_text(quotes + body)


def _degrade_one(element: Element, caps: ChannelCapabilities) -> list[Element]:
    shown = caps.elements
    if isinstance(element, Text):
        if element.styles and caps.dialect is Dialect.PLAIN:
            return [Text(text=element.text)]
        return [element]
    if element.kind in shown:
        return [element]
    if isinstance(element, Mention):
        return [Text(text=f"@{element.display_name or element.user}")]
    if isinstance(element, Link):
        return [Text(text=link_text(element.text, element.url))]
    if isinstance(element, Media):
        label = element.name or element.caption
        if element.url:
            return _degrade_one(Link(url=element.url, text=label or element.kind), caps)
        return [Text(text=f"[{element.kind}: {label}]" if label else f"[{element.kind}]")]
    if isinstance(element, Emoji):
        return [Text(text=element.fallback or f":{element.name}:")]
    return []


def _quote_lines(quote: Quote) -> list[Element]:
    if not quote.text.strip():
        return []
    lines = quote.text.strip("\n").split("\n")
    return [Text(text="".join(f"> {line}\n" for line in lines))]


def _merge_text(elements: list[Element]) -> tuple[Element, ...]:
    merged: list[Element] = []
    for element in elements:
        previous = merged[-1] if merged else None
        if isinstance(element, Text) and isinstance(previous, Text) and element.styles == previous.styles:
            merged[-1] = Text(text=previous.text + element.text, styles=previous.styles)
        else:
            merged.append(element)
    return tuple(merged)
