"""One renderer per markup dialect a platform speaks.

Each renderer specialises the line layout of :class:`gateway.render.layout.Renderer`
by overriding the hooks that differ: how text is escaped and how a style, link,
code block, quote or table is spelled.  All text is untrusted: it is escaped
for the dialect, links are emitted only to ``http``/``https``/``mailto``
targets (others are shown as "text (url)"), and markup is produced only by the
renderer, never copied from the reply.

What each dialect does with the elements chat apps disagree on:

========  ==================  ============================  ====================
dialect   heading             table                         image
========  ==================  ============================  ====================
plain     its text            aligned columns               "alt (url)"
markdown  ``#`` heading       GFM pipe table                ``![alt](url)``
telegram  ``<b>`` line        aligned columns in ``<pre>``  ``<a href>`` alt
html      ``<h1>``-``<h6>``   ``<table>``                   ``<a href>`` alt
slack     ``*bold*`` line     aligned columns in a fence    ``<url|alt>``
whatsapp  ``*bold*`` line     aligned columns in a fence    "alt (url)"
========  ==================  ============================  ====================

Outside Markdown an image is a link: chat text cannot embed a remote image,
Matrix only loads ``mxc://`` sources, and mail clients block remote images.
"""

from __future__ import annotations

import builtins
import re
import unicodedata
from collections.abc import Sequence
from html import escape as html_escape
from typing import ClassVar

from gateway.core.capabilities import Dialect
from gateway.core.messages import Style
from gateway.render.layout import Renderer, join_nonempty, prefix_lines, wrap_marks
from gateway.render.markdown import (
    Align,
    Block,
    Emphasis,
    Image,
    Inline,
    Link,
    ListBlock,
    Paragraph,
    Strong,
    Table,
    Text,
    inline_text,
    link_text,
)


class PlainRenderer(Renderer):
    """Readable plain text (console, WeChat, OneBot): the base layout as it is."""

    dialect = Dialect.PLAIN


class WhatsappRenderer(Renderer):
    """WhatsApp inline markup; it has no escape character, so text goes as it is."""

    dialect = Dialect.WHATSAPP
    rule = "———"
    _MARKS: ClassVar[dict[Style, str]] = {Style.BOLD: "*", Style.ITALIC: "_", Style.STRIKE: "~"}

    def styled(self, style: Style, content: str) -> str:
        return wrap_marks(self._MARKS[style], content)

    def code_span(self, text: str) -> str:
        return wrap_marks("```", text)

    def preformatted(self, text: str) -> str:
        return f"```\n{text}\n```"


class SlackRenderer(WhatsappRenderer):
    """Slack mrkdwn: the same marks as WhatsApp plus ``<url|text>`` links and &, <, > escaped."""

    dialect = Dialect.SLACK_MRKDWN
    bullet = "• "

    def escape(self, text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    def code_span(self, text: str) -> str:
        return wrap_marks("`", self.escape(text))

    def preformatted(self, text: str) -> str:
        return f"```\n{self.escape(text)}\n```"

    def link(self, url: str, children: tuple[Inline, ...]) -> str:
        return self._anchor(url, inline_text(children))

    def image(self, url: str, alt: str) -> str:
        return self._anchor(url, alt)

    def _anchor(self, url: str, text: str) -> str:
        if not self.safe_url(url):
            return self.escape(link_text(text, url))
        target = self.escape(url).replace("|", "%7C")
        return f"<{target}>" if link_text(text, url) == url else f"<{target}|{self.escape(text)}>"


class TelegramRenderer(Renderer):
    """Telegram ``parse_mode=HTML``: only b, i, s, code, pre, a and blockquote; the rest escaped."""

    dialect = Dialect.TELEGRAM_HTML
    bullet = "• "
    rule = "———"
    schemes: ClassVar[tuple[str, ...]] = ("http://", "https://", "mailto:", "tg://")
    _TAGS: ClassVar[dict[Style, str]] = {Style.BOLD: "b", Style.ITALIC: "i", Style.STRIKE: "s"}

    def escape(self, text: str) -> str:
        return html_escape(text, quote=False)

    def styled(self, style: Style, content: str) -> str:
        tag = self._TAGS[style]
        return f"<{tag}>{content}</{tag}>" if content else ""

    def __init__(self) -> None:
        super().__init__()
        self._link_depth = 0
        self._quote_depth = 0

    def code_span(self, text: str) -> str:
        """Telegram lets no entity contain code but b, i, u, s -- and those not either; plain it is."""
        if self._active or self._link_depth:
            return self.escape(text)
        return f"<code>{self.escape(text)}</code>" if text else ""

    def code_block(self, code: str, language: str) -> str:
        if not language:
            return self.preformatted(code)
        return f'<pre><code class="language-{language}">{self.escape(code)}</code></pre>'

    def preformatted(self, text: str) -> str:
        return f"<pre>{self.escape(text)}</pre>"

    def quote(self, blocks: tuple[Block, ...]) -> str:
        """Telegram cannot nest blockquotes, so an inner quote is spelled with "> "."""
        self._quote_depth += 1
        try:
            inner = self.render(blocks)
        finally:
            self._quote_depth -= 1
        if self._quote_depth:
            return prefix_lines(inner, "&gt; ")
        return f"<blockquote>{inner}</blockquote>" if inner else ""

    def link(self, url: str, children: tuple[Inline, ...]) -> str:
        if not self.safe_url(url):
            return self.escape(link_text(inline_text(children), url))
        self._link_depth += 1
        try:
            content = self.inlines(children) or self.escape(url)
        finally:
            self._link_depth -= 1
        return f'<a href="{html_escape(url)}">{content}</a>'

    def image(self, url: str, alt: str) -> str:
        if not self.safe_url(url):
            return self.escape(link_text(alt, url))
        return f'<a href="{html_escape(url)}">{self.escape(alt or url)}</a>'


class HtmlRenderer(TelegramRenderer):
    """Safe HTML for Matrix ``formatted_body``, e-mail and web pages, from a fixed tag allowlist."""

    dialect = Dialect.HTML
    schemes: ClassVar[tuple[str, ...]] = ("http://", "https://", "mailto:")
    rule = "<hr>"
    block_separator = "\n"
    _TAGS = {Style.BOLD: "strong", Style.ITALIC: "em", Style.STRIKE: "del"}
    ALLOWED_TAGS: ClassVar[frozenset[str]] = frozenset(
        "p br strong em del code pre a blockquote ul ol li h1 h2 h3 h4 h5 h6 hr table thead tbody tr th td".split()
    )

    def paragraph(self, inlines: tuple[Inline, ...]) -> str:
        content = self.inlines(inlines)
        return f"<p>{content}</p>" if content else ""

    def heading(self, level: int, inlines: tuple[Inline, ...]) -> str:
        return f"<h{level}>{self.inlines(inlines)}</h{level}>"

    def code_span(self, text: str) -> str:
        return f"<code>{self.escape(text)}</code>" if text else ""

    def code_block(self, code: str, language: str) -> str:
        attr = f' class="language-{language}"' if language else ""
        return f"<pre><code{attr}>{self.escape(code)}</code></pre>"

    def quote(self, blocks: tuple[Block, ...]) -> str:
        inner = self.render(blocks)
        return f"<blockquote>\n{inner}\n</blockquote>" if inner else ""

    def list(self, block: ListBlock) -> str:
        first = block.items[0].number if block.items else None
        tag = "ol" if block.ordered else "ul"
        start = f' start="{first}"' if first is not None and first != 1 else ""
        items = [f"<li>{self.list_item_body(item.blocks, block.tight)}</li>" for item in block.items]
        return f"<{tag}{start}>\n" + "\n".join(items) + f"\n</{tag}>"

    def list_item_body(self, blocks: tuple[Block, ...], tight: bool) -> str:
        if not tight:
            return self.render(blocks)
        rendered = [self.inlines(b.inlines) if isinstance(b, Paragraph) else self.block(b) for b in blocks]
        return join_nonempty(rendered, "\n")

    def table(self, table: Table) -> str:
        def row(cells: tuple[tuple[Inline, ...], ...], tag: str) -> str:
            return "<tr>" + "".join(f"<{tag}>{self.inlines(cell)}</{tag}>" for cell in cells) + "</tr>"

        body = "".join(f"\n{row(cells, 'td')}" for cells in table.rows)
        tbody = f"\n<tbody>{body}\n</tbody>" if table.rows else ""
        return f"<table>\n<thead>\n{row(table.header, 'th')}\n</thead>{tbody}\n</table>"

    def line_break(self, hard: bool) -> str:
        return "<br>\n" if hard else "\n"


class MarkdownRenderer(Renderer):
    """Normalized CommonMark (plus GFM strikethrough and tables), every literal character escaped."""

    dialect = Dialect.MARKDOWN
    rule = "___"  # "---" under a paragraph line is a heading, "- ---" a rule instead of an item
    remarks_continued_items = True
    _families: dict[Style, str]  # the delimiter ("*" or "_") of each emphasis style open around the node
    _other_markers = False  # this list needs the other delimiter, or it would merge with the one before
    _line_bullet: str | None = None  # the bullet of the item whose marker line the next block starts on
    _ALWAYS = re.compile(r"([\\`*_\[\]<>~|])")
    _ENTITY = re.compile(r"&(?=#?[0-9A-Za-z]+;)")
    _LINE_END = re.compile(r"(?m)[ \t]+$")
    _LINE_START = re.compile(r"(?m)^[ \t]*(?:([#+=-])|(\d{1,9})([.)]))?")
    _MARKS: ClassVar[dict[Style, str]] = {Style.BOLD: "**", Style.ITALIC: "*", Style.STRIKE: "~~"}
    _ALIGN_RULE: ClassVar[dict[Align, str]] = {
        Align.NONE: "---", Align.LEFT: ":---", Align.CENTER: ":---:", Align.RIGHT: "---:",
    }

    def __init__(self) -> None:
        super().__init__()
        self._families = {}
        self._edges: builtins.list[tuple[str, str]] = []
        """For each run being spelled: the character before it and the one after it."""

    def escape(self, text: str) -> str:
        return self._ENTITY.sub(r"\\&", self._ALWAYS.sub(r"\\\1", text))

    def math_span(self, text: str) -> str:
        """TeX as written: a Markdown platform that renders it (Zulip) reads it, the parser reads it back as math."""
        return f"$${text}$$"

    def paragraph(self, inlines: tuple[Inline, ...]) -> str:
        """Escape what would start a block at a line start; drop edge spaces that would change meaning."""

        def line_start(match: re.Match[str]) -> str:
            if match.group(1):
                return "\\" + match.group(1)
            return f"{match.group(2)}\\{match.group(3)}" if match.group(2) else ""

        text = self._LINE_END.sub("", self.inlines(inlines))  # two trailing spaces would be a hard break
        return self._LINE_START.sub(line_start, text)

    def heading(self, level: int, inlines: tuple[Inline, ...]) -> str:
        content = re.sub(r"#+$", lambda m: "\\" + m.group(), self.inlines(inlines).strip())
        return "#" * level + (" " + content if content else "")

    def code_block(self, code: str, language: str) -> str:
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", code)), default=0))
        return f"{fence}{language}\n{code}\n{fence}"

    def table(self, table: Table) -> str:
        def row(cells: tuple[tuple[Inline, ...], ...]) -> str:
            return "| " + " | ".join(self.inlines(cell).replace("\n", " ") for cell in cells) + " |"

        rule = "| " + " | ".join(self._ALIGN_RULE[align] for align in table.aligns) + " |"
        return "\n".join([row(table.header), rule, *(row(cells) for cells in table.rows)])

    def render(self, blocks: Sequence[Block]) -> str:
        return self._join_siblings(blocks, tight=False)

    def list_item_body(self, blocks: tuple[Block, ...], tight: bool) -> str:
        return self._join_siblings(blocks, tight)

    def list_markers(self) -> tuple[str, str]:
        return ("* ", ") ") if self._other_markers else ("- ", ". ")

    def list(self, block: ListBlock) -> str:
        """A list whose item starts with another bullet list switches bullets ("- * - ").

        Nested lists that each open their parent item share one line, and a
        line of one bullet repeated ("- - - ", "* * * ") is a thematic break.
        """
        outer = self._line_bullet
        self._line_bullet = None if block.ordered else self.list_markers()[0]
        try:
            return super().list(block)
        finally:
            self._line_bullet = outer

    def _join_siblings(self, blocks: Sequence[Block], tight: bool) -> str:
        """Join sibling blocks so they parse back as siblings.

        Two paragraphs need a blank line or they merge; two lists of one kind
        need different markers or they merge; a bullet list opening an item
        needs a bullet other than the item's (see :meth:`list`).
        """
        line_bullet, self._line_bullet = self._line_bullet, None  # only this item's first block shares its line
        try:
            return self._join(blocks, tight, line_bullet)
        finally:
            self._line_bullet = line_bullet

    def _join(self, blocks: Sequence[Block], tight: bool, line_bullet: str | None) -> str:
        out, previous, other = "", None, False
        for child in blocks:
            if isinstance(previous, ListBlock) and isinstance(child, ListBlock):
                other = child.ordered == previous.ordered and not other
            elif previous is None and isinstance(child, ListBlock) and not child.ordered:
                other = line_bullet == "- "
            else:
                other = False
            self._other_markers = other
            rendered = self.block(child)
            if rendered and out:
                both_paragraphs = isinstance(child, Paragraph) and isinstance(previous, Paragraph)
                out += "\n" if tight and not both_paragraphs else "\n\n"
            out += rendered
            previous = child
        return out

    def inline(self, node: Inline, following: Inline | None = None) -> str:
        rendered = super().inline(node, following)
        if isinstance(node, Text) and rendered.endswith("!") and isinstance(following, (Link, Image)):
            rendered = rendered[:-1] + "\\!"  # "!" before "[" would make the link an image
        return rendered

    def inlines(self, nodes: tuple[Inline, ...]) -> str:
        """Spell siblings so delimiter runs cannot merge: ``*a*`` then ``*b*`` is ``*a*_b_``, not ``*a**b*``.

        A style already open around a run is not spelled again (italic inside
        italic reads as italic, and a second spelling only lets the delimiter
        rules pair the wrong runs: ``*:_0:*:*_*``).  Any other emphasis or
        strong run is spelled with ``*`` unless the text before it already ends
        in ``*`` (the two runs would merge into one delimiter run); then ``_``
        is used if the flanking rules let ``_`` open and close there (nothing
        inside a word on either side), else the run before is switched to
        ``_``, else the style is dropped.
        """
        pieces: list[str] = []
        for i, node in enumerate(nodes):
            following = nodes[i + 1] if i + 1 < len(nodes) else None
            before = pieces[-1] if pieces else ""
            style = _MARKABLE.get(type(node))
            if style is None:
                pieces.append(self.inline(node, following))
                continue
            nested = self._families.get(style)
            touching = _ends_with_mark(before, "*")
            if nested is not None:
                pieces.append(self.inlines(node.children))  # type: ignore[union-attr]  # italic in italic reads as italic
            elif not touching:
                pieces.append(self._styled_with(node, style, "*", before, following))
            elif self._under_allowed(before, following) and self._edge_allows_under(i, len(nodes)):
                pieces.append(self._styled_with(node, style, "_", before, following))
            elif self._switch_previous(pieces, nodes, i - 1, node):
                pieces.append(self._styled_with(node, style, "*", before, following))
            else:
                pieces.append(self.inlines(node.children))  # type: ignore[union-attr]  # no spelling keeps it
        return "".join(pieces)

    def _switch_previous(self, pieces: builtins.list[str], nodes: tuple[Inline, ...], index: int, node: Inline) -> bool:
        """Respell the run before ``node`` with ``_`` so the two no longer touch with ``*``."""
        previous = nodes[index] if index >= 0 else None
        style = _MARKABLE.get(type(previous))
        if style is None or style in self._families or not pieces[-1].startswith("*"):
            return False
        earlier = pieces[-2] if len(pieces) > 1 else ""
        if not self._under_allowed(earlier, node):
            return False
        pieces[-1] = self._styled_with(previous, style, "_", earlier, node)  # type: ignore[arg-type]
        return True

    def _under_allowed(self, before: str, following: Inline | None) -> bool:
        """Whether ``_`` delimiters open and close between ``before`` and ``following``.

        Unlike ``*``, ``_`` cannot open after or close before a character inside a word,
        and must not touch another ``_`` run; an escaped ``\\_`` is text and fine.
        """
        after = self.escape(following.text)[:1] if isinstance(following, Text) else ""
        last = before[-1:]
        return not (_in_word(last) or _in_word(after) or _ends_with_mark(before, "_"))

    def _edge_allows_under(self, index: int, count: int) -> bool:
        """Whether a ``_`` run may open or close the run it sits in (``index`` of ``count`` children).

        A ``*`` run opening right before ``_`` (punctuation) cannot open after a letter or digit, nor
        close right after it before one: ``0**__0__**`` is not bold.  Then the nested style is dropped.
        """
        if not self._edges:
            return True
        before, after = self._edges[-1]
        return not ((index == 0 and _in_word(before)) or (index == count - 1 and _in_word(after)))

    def _styled_with(self, node: Inline, style: Style, family: str, before: str = "", following: Inline | None = None) -> str:
        outer = self._families.get(style)
        self._families[style] = family
        after = self._first_shown(following)
        self._edges.append((before[-1:], after))
        try:
            content = self.inlines(node.children)  # type: ignore[union-attr]
        finally:
            self._edges.pop()
            if outer is None:
                del self._families[style]
            else:
                self._families[style] = outer
        if family == "*" and not _star_flanks(before[-1:], content.strip(), after):
            return content  # no spelling reads back: the style goes, the words stay
        mark = self._MARKS[style] if family == "*" else "_" * len(self._MARKS[style])
        return wrap_marks(mark, content)

    def _first_shown(self, following: Inline | None) -> str:
        """The first character written after a run: a link with an unsafe target is written as its
        text, so a closing ``**`` may end up right before a letter (``**\\_**a``, not bold)."""
        if isinstance(following, Text):
            return self.escape(following.text)[:1]
        if isinstance(following, (Link, Image)):
            return self.inline(following)[:1]
        return ""

    def styled(self, style: Style, content: str) -> str:
        return wrap_marks(self._MARKS[style], content)

    def code_span(self, text: str) -> str:
        if not text:
            return ""
        fence = "`" * (1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
        padded = text.startswith("`") or text.endswith("`") or (text[:1] == text[-1:] == " " and text.strip())
        return f"{fence} {text} {fence}" if padded else f"{fence}{text}{fence}"

    def link(self, url: str, children: tuple[Inline, ...]) -> str:
        plain = inline_text(children)
        if not self.safe_url(url):
            return self.escape(link_text(plain, url))
        target = url.replace("(", "%28").replace(")", "%29").replace("<", "%3C").replace(">", "%3E")
        if link_text(plain, url) == url and target == url:
            return f"<{url}>"
        return f"[{self.inlines(children) or self.escape(url)}]({target})"

    def image(self, url: str, alt: str) -> str:
        if not self.safe_url(url):
            return self.escape(link_text(alt, url))
        target = url.replace("(", "%28").replace(")", "%29").replace("<", "%3C").replace(">", "%3E")
        return f"![{self.escape(alt)}]({target})"

    def line_break(self, hard: bool) -> str:
        return "\\\n" if hard else "\n"


def _in_word(char: str) -> bool:
    """Whether ``char`` keeps a ``_`` run from opening or closing beside it.

    CommonMark lets ``_`` flank only whitespace or punctuation; a letter, a digit and
    also a combining mark (U+0300) are inside a word.  Symbols count as inside too: that
    errs towards another spelling, never towards one that does not read back.
    """
    if not char or char.isspace():
        return False
    ascii_punctuation = char.isascii() and not char.isalnum()
    return not (ascii_punctuation or unicodedata.category(char).startswith("P"))


def _star_flanks(before: str, content: str, after: str) -> bool:
    """Whether ``*`` runs open before ``content`` and close after it, between ``before`` and ``after``.

    A run beside a letter or digit flanks only if the content's edge there is not punctuation:
    ``a**\\_**`` opens nothing, ``**\\_**a`` closes nothing."""
    def punctuation(char: str) -> bool:
        return bool(char) and not char.isspace() and not _in_word(char)

    return not ((_in_word(before) and punctuation(content[:1])) or (punctuation(content[-1:]) and _in_word(after)))


def _ends_with_mark(rendered: str, mark: str) -> bool:
    """Whether Markdown ends in an unescaped ``mark`` (a delimiter another run could merge with)."""
    if not rendered.endswith(mark):
        return False
    rest = rendered[: -len(mark)]
    return (len(rest) - len(rest.rstrip("\\"))) % 2 == 0


_MARKABLE: dict[type, Style] = {Strong: Style.BOLD, Emphasis: Style.ITALIC}

_RENDERERS: dict[Dialect, type[Renderer]] = {
    cls.dialect: cls
    for cls in (PlainRenderer, MarkdownRenderer, TelegramRenderer, HtmlRenderer, SlackRenderer, WhatsappRenderer)
}


def renderer_for(dialect: Dialect) -> Renderer:
    """A fresh renderer (renderers keep a little state while rendering, so none is shared)."""
    return _RENDERERS[dialect]()


def render_blocks(blocks: Sequence[Block], dialect: Dialect) -> str:
    """Render a whole tree without splitting (previews, streaming, tests)."""
    return renderer_for(dialect).render(blocks)
