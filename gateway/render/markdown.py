"""Markdown from the model, parsed once into a small typed tree.

Every dialect renderer and the splitter work on this tree, never on Markdown
text: a split is a cut between (or inside) nodes, and each piece is rendered
on its own, so every part is valid markup by construction.

The parser is markdown-it-py's CommonMark preset plus GFM strikethrough and
tables, with **raw HTML switched off**: model output is untrusted, and with
``html=False`` a ``<script>`` or ``<b>`` in the reply is ordinary text that each
renderer escapes.  markdown-it also refuses ``javascript:``/``vbscript:``/
``file:`` link targets; renderers apply their own scheme allowlist on top.

Text is cleaned before parsing: C0 control characters (other than tab and
newline) are removed and lone surrogates become U+FFFD, so nothing downstream
has to guard against a string that cannot be encoded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.tree import SyntaxTreeNode

_MAX_NESTING = 100  # deeper than this markdown-it drops the rest of the input; see parse()
_PARSER = MarkdownIt("commonmark", {"html": False, "maxNesting": _MAX_NESTING}).enable(["strikethrough", "table"])


def _math_inline(state: StateInline, silent: bool) -> bool:
    """``$$...$$`` (not ``$$$``), closed on the same paragraph: one token whose content is the TeX, untouched."""
    start, src = state.pos, state.src
    if not src.startswith("$$", start) or src.startswith("$$$", start):
        return False
    end = src.find("$$", start + 2)
    while end != -1 and src.startswith("$$$", end):
        end = src.find("$$", end + 3)
    if end == -1 or end == start + 2:
        return False
    if not silent:
        state.push("math_inline", "", 0).content = src[start + 2:end]
    state.pos = end + 2
    return True


_PARSER.inline.ruler.before("escape", "math_inline", _math_inline)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")


# --------------------------------------------------------------------------- inlines


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Strong:
    children: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class Emphasis:
    children: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class Strike:
    children: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class Code:
    text: str


@dataclass(frozen=True, slots=True)
class Math(Code):
    """``$$...$$``: TeX kept exactly as written, for a platform that renders it (Zulip); CommonMark would
    otherwise take ``\\{`` or ``\\\\`` inside it for escapes and ``*a*`` for emphasis.  Shown as text elsewhere."""


@dataclass(frozen=True, slots=True)
class Link:
    url: str
    children: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class Image:
    url: str
    alt: str


@dataclass(frozen=True, slots=True)
class LineBreak:
    """A soft break (a newline in the source paragraph) or a hard one (``\\`` or two spaces)."""

    hard: bool = False


Inline = Text | Strong | Emphasis | Strike | Code | Math | Link | Image | LineBreak


# --------------------------------------------------------------------------- blocks


class Align(str, Enum):
    NONE = "none"
    LEFT = "left"
    CENTER = "center"
    RIGHT = "right"


@dataclass(frozen=True, slots=True)
class Paragraph:
    inlines: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    inlines: tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class CodeBlock:
    code: str
    language: str = ""


@dataclass(frozen=True, slots=True)
class BlockQuote:
    blocks: tuple[Block, ...]


@dataclass(frozen=True, slots=True)
class ListItem:
    """One item; ``number`` is its ordinal in an ordered list, kept when the item is split.

    ``continued`` marks the rest of an item split across parts, which text
    dialects show indented under the item instead of under a second marker.
    """

    number: int | None
    blocks: tuple[Block, ...]
    continued: bool = False


@dataclass(frozen=True, slots=True)
class ListBlock:
    ordered: bool
    items: tuple[ListItem, ...]
    tight: bool = True


@dataclass(frozen=True, slots=True)
class ThematicBreak:
    pass


Cell = tuple[Inline, ...]


@dataclass(frozen=True, slots=True)
class Table:
    header: tuple[Cell, ...]
    aligns: tuple[Align, ...]
    rows: tuple[tuple[Cell, ...], ...]


Block = Paragraph | Heading | CodeBlock | BlockQuote | ListBlock | ThematicBreak | Table


# --------------------------------------------------------------------------- parsing


def clean(text: str) -> str:
    """Drop control characters and repair surrogates so every encoder accepts the text."""
    repaired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return _CONTROL.sub("", repaired.replace("\r\n", "\n").replace("\r", "\n"))


def parse(markdown: str) -> tuple[Block, ...]:
    """Parse Markdown into blocks; a reply with nothing visible gives ``()``.

    Blocks nested deeper than markdown-it allows would be silently dropped, so
    such a reply (only ever hostile) is shown as plain text instead.
    """
    text = clean(markdown)
    tokens = _PARSER.parse(text)
    if any(token.level >= _MAX_NESTING - 1 for token in tokens):
        flat = text_paragraph(text)
        return () if flat is None else (flat,)
    return _blocks(SyntaxTreeNode(tokens).children)


def _blocks(nodes: list[SyntaxTreeNode]) -> tuple[Block, ...]:
    out: list[Block] = []
    for node in nodes:
        block = _block(node)
        if isinstance(block, ListBlock) and out and isinstance(out[-1], Paragraph):
            block = _without_leading_empty_items(block)
        if block is not None:
            out.append(block)
    return tuple(out)


def _without_leading_empty_items(block: ListBlock) -> ListBlock | None:
    """A list right after a paragraph, minus the empty items it opens with.

    Such an item shows only its bullet, and no spelling can keep it: an empty item cannot
    interrupt a paragraph, so ``text`` then ``-`` reads back as a heading's underline.
    (What emptied it was dropped already: an empty heading or code fence.)
    """
    items = list(block.items)
    while items and not items[0].blocks:
        items.pop(0)
    if not items:
        return None
    if block.ordered:
        start = block.items[0].number or 1
        items = [ListItem(start + i, item.blocks, item.continued) for i, item in enumerate(items)]
    return ListBlock(block.ordered, tuple(items), block.tight)


def _block(node: SyntaxTreeNode) -> Block | None:
    kind = node.type
    if kind == "paragraph":
        inlines = _inline_children(node)
        return Paragraph(inlines) if inlines else None
    if kind == "heading":
        inlines = _inline_children(node, one_line=True)
        return Heading(int(node.tag[1]), inlines) if inline_text(inlines).strip() else None
    if kind in ("fence", "code_block"):
        match = _LANGUAGE.match(node.info.strip()) if kind == "fence" else None
        code = node.content.removesuffix("\n")
        return CodeBlock(code, match.group() if match else "") if code.strip() else None
    if kind == "blockquote":
        quoted = _blocks(node.children)
        return BlockQuote(quoted) if quoted else None
    if kind in ("bullet_list", "ordered_list"):
        return _list(node)
    if kind == "hr":
        return ThematicBreak()
    if kind == "table":
        table = _table(node)
        return table if any(inline_text(cell).strip() for row in (table.header, *table.rows) for cell in row) else None
    text = node.content.strip()  # html_block cannot occur with html=False; keep any other text visible
    return Paragraph((Text(text),)) if text else None


def _list(node: SyntaxTreeNode) -> ListBlock:
    ordered = node.type == "ordered_list"
    start = int(node.attrs.get("start", 1)) if ordered else 0
    items = tuple(
        ListItem(start + i if ordered else None, _blocks(item.children)) for i, item in enumerate(node.children)
    )
    # only paragraphs that are kept decide: a dropped blank one ("- \u00a0") must not make the list loose
    paragraphs = [
        child for item in node.children for child in item.children
        if child.type == "paragraph" and _inline_children(child)
    ]
    return ListBlock(ordered, items, tight=all(p.hidden for p in paragraphs))


def _table(node: SyntaxTreeNode) -> Table:
    rows = [tr for section in node.children for tr in section.children]
    header = rows[0].children if rows else []
    aligns = tuple(_align(str(cell.attrs.get("style", ""))) for cell in header)
    width = len(header)

    def cells(tr: SyntaxTreeNode) -> tuple[Cell, ...]:
        got = [_inline_children(cell) for cell in tr.children][:width]
        return tuple(got + [()] * (width - len(got)))

    return Table(cells(rows[0]) if rows else (), aligns, tuple(cells(tr) for tr in rows[1:]))


def _align(style: str) -> Align:
    for align in (Align.LEFT, Align.CENTER, Align.RIGHT):
        if align.value in style:
            return align
    return Align.NONE


def _inline_children(node: SyntaxTreeNode, one_line: bool = False) -> tuple[Inline, ...]:
    return _inlines(node.children[0].children, False, one_line) if node.children else ()


def _inlines(nodes: list[SyntaxTreeNode], in_link: bool = False, one_line: bool = False) -> tuple[Inline, ...]:
    """Inline nodes; ``one_line`` (a heading, which setext syntax lets span lines) turns breaks into spaces."""
    out: list[Inline] = []
    for node in nodes:
        kind = node.type
        if kind == "softbreak" or kind == "hardbreak":
            out.append(Text(" ") if one_line else LineBreak(hard=kind == "hardbreak"))
        elif kind == "code_inline":
            out.append(Code(node.content))
        elif kind == "math_inline":
            out.append(Math(node.content))
        elif kind in ("strong", "em", "s"):
            out.append(_WRAPPERS[kind](_inlines(node.children, in_link, one_line)))
        elif kind == "link":
            out.append(Link(str(node.attrs.get("href", "")), _inlines(node.children, True, one_line)))
        elif kind == "image":
            alt = inline_text(_inlines(node.children, in_link))
            # an image inside a link would nest two anchors; the link's target is what matters
            out.append(Text(alt or "image") if in_link else Image(str(node.attrs.get("src", "")), alt))
        elif node.content:
            out.append(Text(node.content))
    return _merge_text(out)


_WRAPPERS: dict[str, type[Strong] | type[Emphasis] | type[Strike]] = {"strong": Strong, "em": Emphasis, "s": Strike}


def _merge_text(nodes: list[Inline]) -> tuple[Inline, ...]:
    merged: list[Inline] = []
    for node in nodes:
        if isinstance(node, Text) and merged and isinstance(merged[-1], Text):
            merged[-1] = Text(merged[-1].text + node.text)
        elif not (isinstance(node, Text) and not node.text):
            merged.append(node)
    return tuple(merged)


# --------------------------------------------------------------------------- flattening


def inline_text(nodes: tuple[Inline, ...], *, with_urls: bool = False) -> str:
    """The visible text of inlines; ``with_urls`` spells links as "text (url)"."""
    parts: list[str] = []
    for node in nodes:
        if isinstance(node, (Text, Code)):
            parts.append(node.text)
        elif isinstance(node, LineBreak):
            parts.append("\n")
        elif isinstance(node, Image):
            parts.append(link_text(node.alt, node.url) if with_urls else node.alt)
        elif isinstance(node, Link):
            text = inline_text(node.children, with_urls=with_urls)
            parts.append(link_text(text, node.url) if with_urls else text)
        else:
            parts.append(inline_text(node.children, with_urls=with_urls))
    return "".join(parts)


def link_text(text: str, url: str) -> str:
    """The plain-text spelling of a link: "text (url)", or one of them when they say the same."""
    if not text.strip() or text == url:
        return url
    if not url or text == url.removeprefix("mailto:"):
        return text
    return f"{text} ({url})"


def block_text(block: Block) -> str:
    """Readable plain text of one block, structure spelled in characters; the splitter's last resort."""
    if isinstance(block, (Paragraph, Heading)):
        return inline_text(block.inlines, with_urls=True)
    if isinstance(block, CodeBlock):
        return block.code
    if isinstance(block, BlockQuote):
        return "\n".join(block_text(child) for child in block.blocks)
    if isinstance(block, ListBlock):
        lines = []
        for item in block.items:
            marker = f"{item.number}. " if item.number is not None else "- "
            lines.append(marker + "\n".join(block_text(child) for child in item.blocks))
        return "\n".join(lines)
    if isinstance(block, Table):
        rows = (block.header, *block.rows)
        return "\n".join(" | ".join(inline_text(cell, with_urls=True) for cell in row) for row in rows)
    return ""


def text_paragraph(text: str) -> Paragraph | None:
    """A paragraph of unstyled text whose newlines are hard breaks; None if nothing is visible."""
    if not text.strip():
        return None
    nodes: list[Inline] = []
    for i, line in enumerate(text.split("\n")):
        if i:
            nodes.append(LineBreak(hard=True))
        if line:
            nodes.append(Text(line))
    return Paragraph(tuple(nodes))
