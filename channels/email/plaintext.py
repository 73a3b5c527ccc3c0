"""HTML to plain text, for HTML-only mail we receive.

Our own replies never come through here: their text/plain alternative is the
renderer's plain twin of the same Markdown (``RenderedPart.plain``).

Only what the renderer's HTML dialect and ordinary mail use matters:
paragraphs and line breaks become newlines, list items get a bullet, links
keep their URL as ``text (url)``, scripts and styles vanish.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

BLOCKS = frozenset({"p", "div", "br", "li", "ul", "ol", "pre", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "table", "hr"})
SILENT = frozenset({"script", "style", "head", "title"})


class _Flattener(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._silent = 0
        self._links: list[str | None] = []

    def handle_starttag(self, tag, attrs):
        if tag in SILENT:
            self._silent += 1
        elif tag in BLOCKS:
            self.out.append("\n")
            if tag == "li":
                self.out.append("- ")
        if tag == "a":
            self._links.append(dict(attrs).get("href"))

    def handle_endtag(self, tag):
        if tag in SILENT:
            self._silent = max(0, self._silent - 1)
        elif tag in BLOCKS and tag not in ("br", "li"):  # an item ends where the next begins
            self.out.append("\n")
        if tag == "a" and self._links:
            href = self._links.pop()
            if href and not href.startswith("mailto:") and href not in (self.out[-1] if self.out else ""):
                self.out.append(f" ({href})")

    def handle_data(self, data):
        if not self._silent:
            self.out.append(data)


def html_to_text(html: str) -> str:
    parser = _Flattener()
    parser.feed(html)
    parser.close()
    text = "".join(parser.out)
    # blanks before a line end go line by line: the regex [ \t]+\n is quadratic in a run of blanks
    text = "\n".join(line.rstrip(" \t") for line in text.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", text).strip()
