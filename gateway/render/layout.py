"""Chat-text layout: the base renderer, and plain text is what it renders.

Every chat app shows a message as lines, so the block layout is shared: blank
lines between blocks, "> " before quoted lines, a marker and a hanging indent
for list items, tables as aligned monospace columns.  A dialect subclass
(:mod:`gateway.render.dialects`) overrides only the hooks that differ -- how
text is escaped and how a style, link, code block or quote is spelled.  The
base hooks produce readable plain text: styles dropped, links as
"text (url)", code verbatim.

A renderer keeps a little state while it renders (which styles are open, how
deep in quotes it is), so instances are not shared between threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from gateway.core.capabilities import Dialect
from gateway.core.messages import Style
from gateway.render.graphemes import display_width
from gateway.render.markdown import (
    Align,
    Block,
    BlockQuote,
    Code,
    CodeBlock,
    Emphasis,
    Heading,
    Image,
    Inline,
    LineBreak,
    Link,
    ListBlock,
    Math,
    Paragraph,
    Strike,
    Strong,
    Table,
    Text,
    inline_text,
    link_text,
)

_STYLE_OF = {Strong: Style.BOLD, Emphasis: Style.ITALIC, Strike: Style.STRIKE}


def join_nonempty(parts: Sequence[str], sep: str) -> str:
    return sep.join(part for part in parts if part)


def indent_rest(text: str, pad: str) -> str:
    first, *rest = text.split("\n")
    return "\n".join([first, *(pad + line if line else line for line in rest)])


def prefix_lines(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else prefix.rstrip() for line in text.split("\n"))


def wrap_marks(marker: str, content: str) -> str:
    """Wrap ``content`` in a delimiter pair, keeping edge whitespace outside (flanking rules)."""
    core = content.strip()
    if not core:
        return content
    lead, trail = content[: len(content) - len(content.lstrip())], content[len(content.rstrip()) :]
    return f"{lead}{marker}{core}{marker}{trail}"


def aligned_table(table: Table) -> str:
    """A table as monospace text columns, for dialects without table markup."""
    rows = [[inline_text(cell, with_urls=True) for cell in row] for row in (table.header, *table.rows)]
    widths = [max(display_width(row[i]) for row in rows) for i in range(len(table.header))]

    def line(row: list[str]) -> str:
        cells = []
        for cell, width, align in zip(row, widths, table.aligns, strict=True):
            gap = width - display_width(cell)
            left = gap if align is Align.RIGHT else gap // 2 if align is Align.CENTER else 0
            cells.append(" " * left + cell + " " * (gap - left))
        return " | ".join(cells).rstrip()

    return "\n".join([line(rows[0]), "-+-".join("-" * w for w in widths), *(line(row) for row in rows[1:])])


class Renderer:
    """Readable plain text; the base every chat dialect specialises."""

    dialect: ClassVar[Dialect] = Dialect.PLAIN
    bullet: ClassVar[str] = "- "
    rule: ClassVar[str] = "---"
    quote_prefix: ClassVar[str] = "> "
    block_separator: ClassVar[str] = "\n\n"
    remarks_continued_items: ClassVar[bool] = False  # Markdown needs a marker, or the rest becomes code
    schemes: ClassVar[tuple[str, ...]] = ("http://", "https://", "mailto:")

    def __init__(self) -> None:
        self._active: set[Style] = set()  # styles open around the node being rendered

    def render(self, blocks: Sequence[Block]) -> str:
        return join_nonempty([self.block(block) for block in blocks], self.block_separator)

    def block(self, block: Block) -> str:
        match block:
            case Paragraph(inlines):
                return self.paragraph(inlines)
            case Heading(level, inlines):
                return self.heading(level, inlines)
            case CodeBlock(code, language):
                return self.code_block(code, language)
            case BlockQuote(blocks):
                return self.quote(blocks)
            case ListBlock():
                return self.list(block)
            case Table():
                return self.table(block)
        return self.rule

    def safe_url(self, url: str) -> bool:
        return url.lower().startswith(self.schemes) and not any(ch.isspace() for ch in url)

    # block hooks
    def paragraph(self, inlines: tuple[Inline, ...]) -> str:
        return self.inlines(inlines)

    def heading(self, level: int, inlines: tuple[Inline, ...]) -> str:
        return self.styled_inlines(Style.BOLD, inlines)

    def code_block(self, code: str, language: str) -> str:
        return self.preformatted(code)

    def preformatted(self, text: str) -> str:
        return text

    def quote(self, blocks: tuple[Block, ...]) -> str:
        return prefix_lines(self.render(blocks), self.quote_prefix)

    def list(self, block: ListBlock) -> str:
        sep = "\n" if block.tight else "\n\n"
        bullet, delimiter = self.list_markers()
        items = []
        for item in block.items:
            marker = f"{item.number}{delimiter}" if item.number is not None else bullet
            pad = " " * len(marker)
            body = indent_rest(self.list_item_body(item.blocks, block.tight), pad)
            items.append((pad if item.continued and not self.remarks_continued_items else marker) + body)
        return sep.join(items)

    def list_markers(self) -> tuple[str, str]:
        """The bullet, and what follows an item number."""
        return self.bullet, ". "

    def list_item_body(self, blocks: tuple[Block, ...], tight: bool) -> str:
        return join_nonempty([self.block(child) for child in blocks], "\n" if tight else "\n\n")

    def table(self, table: Table) -> str:
        return self.preformatted(aligned_table(table))

    # inline hooks
    def inlines(self, nodes: tuple[Inline, ...]) -> str:
        return "".join(self.inline(node, nodes[i + 1] if i + 1 < len(nodes) else None) for i, node in enumerate(nodes))

    def inline(self, node: Inline, following: Inline | None = None) -> str:
        match node:
            case Text(text):
                return self.escape(text)
            case Strong(children) | Emphasis(children) | Strike(children):
                return self.styled_inlines(_STYLE_OF[type(node)], children)
            case Math(text):
                return self.math_span(text)
            case Code(text):
                return self.code_span(text)
            case Link(url, children):
                return self.link(url, children)
            case Image(url, alt):
                return self.image(url, alt)
            case LineBreak(hard):
                return self.line_break(hard)
        raise TypeError(f"not an inline node: {node!r}")

    def styled_inlines(self, style: Style, children: tuple[Inline, ...]) -> str:
        """Apply ``style`` unless an enclosing node already did: ``*a *b**`` would not parse back."""
        if style in self._active:
            return self.inlines(children)
        self._active.add(style)
        try:
            return self.styled(style, self.inlines(children))
        finally:
            self._active.discard(style)

    def escape(self, text: str) -> str:
        return text

    def styled(self, style: Style, content: str) -> str:
        return content

    def code_span(self, text: str) -> str:
        return self.escape(text)

    def math_span(self, text: str) -> str:
        """``$$...$$`` as text in the dialect's escaping: the formula as typed (the Markdown dialect keeps it raw)."""
        return self.escape(f"$${text}$$")

    def link(self, url: str, children: tuple[Inline, ...]) -> str:
        return self.escape(link_text(inline_text(children), url))

    def image(self, url: str, alt: str) -> str:
        return self.escape(link_text(alt, url))

    def line_break(self, hard: bool) -> str:
        return "\n"
