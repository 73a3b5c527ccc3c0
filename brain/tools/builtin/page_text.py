"""HTML to readable plain text with the standard library's ``html.parser``.

Good enough for a model to read a page: scripts, styles and other non-text
are dropped, block elements become line breaks, list items get a dash, runs
of whitespace collapse.  It does not try to find the "main content"; a page
is capped in size before it gets here and the model copes with navigation.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_SKIPPED = {"script", "style", "noscript", "template", "svg", "math", "iframe", "object", "canvas", "select", "head"}
_BLOCKS = {
    "address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt", "fieldset",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li",
    "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tr", "ul",
}  # fmt: skip
_VOID = {"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"}


class _Extractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self._skipping: list[str] = []
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag == "body":
            self._skipping.clear()  # a head left open (its end tag is optional) ends here
        elif tag in _SKIPPED and tag not in _VOID:
            self._skipping.append(tag)
        elif not self._skipping and tag in _BLOCKS:
            self.parts.append("\n- " if tag == "li" else "\n")
        elif not self._skipping and tag in {"td", "th"}:
            self.parts.append(" | ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self._skipping and tag in _BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif self._skipping and tag == self._skipping[-1]:
            self._skipping.pop()
        elif not self._skipping and tag in _BLOCKS and tag != "li":  # the next item starts its own line
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._skipping:
            self.parts.append(data)


def tidy(text: str) -> str:
    """Collapse spaces within lines and blank lines between them."""
    lines = (" ".join(line.split()) for line in text.splitlines())
    joined = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", joined).strip()


def html_to_text(html: str) -> tuple[str, str]:
    """``(title, text)`` of an HTML document."""
    parser = _Extractor()
    parser.feed(html)
    parser.close()
    return " ".join("".join(parser.title).split()), tidy("".join(parser.parts))
