"""Checks shared by the render tests: is a part valid markup, and what text does it show."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from gateway.core.capabilities import Dialect
from gateway.render.dialects import HtmlRenderer
from gateway.render.markdown import (
    Block,
    BlockQuote,
    Code,
    CodeBlock,
    Heading,
    Image,
    Inline,
    LineBreak,
    Link,
    ListBlock,
    Paragraph,
    Table,
    Text,
)

TELEGRAM_TAGS = frozenset({"b", "i", "s", "u", "code", "pre", "a", "blockquote"})
VOID_TAGS = frozenset({"br", "hr"})
ALLOWED_ATTRS = {("a", "href"), ("code", "class"), ("ol", "start")}
SAFE_SCHEMES = ("http://", "https://", "mailto:", "tg://")


class _Checker(HTMLParser):
    def __init__(self, allowed: frozenset[str]) -> None:
        super().__init__(convert_charrefs=False)
        self.allowed = allowed
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.allowed:
            self.errors.append(f"tag <{tag}> not allowed")
        for name, value in attrs:
            if (tag, name) not in ALLOWED_ATTRS:
                self.errors.append(f"attribute {name} on <{tag}>")
            if name == "href" and not (value or "").lower().startswith(SAFE_SCHEMES):
                self.errors.append(f"unsafe href {value!r}")
        if tag not in VOID_TAGS:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.errors.append(f"self-closing <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        if re.search(r"[<>&]", data):
            self.errors.append(f"unescaped markup character in {data!r}")
        self.text.append(data)

    def handle_entityref(self, name: str) -> None:
        entity = {"amp": "&", "lt": "<", "gt": ">", "quot": '"'}.get(name)
        if entity is None:
            self.errors.append(f"unknown entity &{name};")
        self.text.append(entity or "")

    def handle_charref(self, name: str) -> None:
        self.text.append(chr(int(name[1:], 16) if name[:1] in "xX" else int(name)))

    def unknown_decl(self, data: str) -> None:
        self.errors.append(f"declaration {data!r}")

    def handle_comment(self, data: str) -> None:
        self.errors.append(f"comment {data!r}")

    def handle_decl(self, decl: str) -> None:
        self.errors.append(f"declaration {decl!r}")

    def handle_pi(self, data: str) -> None:
        self.errors.append(f"processing instruction {data!r}")


def html_text(part: str, dialect: Dialect) -> str:
    """The text an HTML part shows; fails if it is not balanced, allowlisted, fully escaped markup."""
    checker = _Checker(TELEGRAM_TAGS if dialect is Dialect.TELEGRAM_HTML else HtmlRenderer.ALLOWED_TAGS)
    checker.feed(part)
    checker.close()
    assert not checker.errors, (checker.errors, part)
    assert not checker.stack, (f"unclosed {checker.stack}", part)
    return "".join(checker.text)


def shown_text(part: str, dialect: Dialect) -> str:
    """What a reader sees of one part, roughly: markup characters may remain, escapes are undone."""
    if dialect in (Dialect.HTML, Dialect.TELEGRAM_HTML):
        return html_text(part, dialect)
    if dialect is Dialect.SLACK_MRKDWN:
        return part.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return part


def visible_text(blocks: tuple[Block, ...] | list[Block]) -> str:
    """Every character of the tree a reader must see somewhere, in order."""
    out: list[str] = []

    def inlines(nodes: tuple[Inline, ...]) -> None:
        for node in nodes:
            if isinstance(node, (Text, Code)):
                out.append(node.text)
            elif isinstance(node, Image):
                out.append(node.alt)
            elif isinstance(node, LineBreak):
                out.append("\n")
            elif isinstance(node, Link):
                inlines(node.children)
            else:
                inlines(node.children)

    def walk(block: Block) -> None:
        if isinstance(block, (Paragraph, Heading)):
            inlines(block.inlines)
        elif isinstance(block, CodeBlock):
            out.append(block.code)
        elif isinstance(block, BlockQuote):
            for child in block.blocks:
                walk(child)
        elif isinstance(block, ListBlock):
            for item in block.items:
                for child in item.blocks:
                    walk(child)
        elif isinstance(block, Table):
            for row in (block.header, *block.rows):
                for cell in row:
                    inlines(cell)

    for block in blocks:
        walk(block)
    return "".join(out)


def without_space(text: str) -> str:
    return "".join(ch for ch in text if not ch.isspace())


def is_subsequence(needle: str, haystack: str) -> bool:
    """True when every character of ``needle`` appears in ``haystack`` in the same order."""
    it = iter(haystack)
    return all(ch in it for ch in needle)
