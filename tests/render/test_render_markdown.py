"""The parser: Markdown in, the typed tree out, untrusted input kept as text."""

from __future__ import annotations

from gateway.render.markdown import (
    Align,
    BlockQuote,
    Code,
    CodeBlock,
    Emphasis,
    Heading,
    Image,
    LineBreak,
    Link,
    ListBlock,
    ListItem,
    Paragraph,
    Strike,
    Strong,
    Table,
    Text,
    ThematicBreak,
    block_text,
    inline_text,
    link_text,
    parse,
    text_paragraph,
)


def test_paragraph_with_every_inline() -> None:
    (para,) = parse("a **b** *c* ~~d~~ `e` [f](https://x.org) ![g](https://x.org/g.png)  \nh\ni")
    assert para == Paragraph((
        Text("a "), Strong((Text("b"),)), Text(" "), Emphasis((Text("c"),)), Text(" "), Strike((Text("d"),)),
        Text(" "), Code("e"), Text(" "), Link("https://x.org", (Text("f"),)), Text(" "),
        Image("https://x.org/g.png", "g"), LineBreak(hard=True), Text("h"), LineBreak(hard=False), Text("i"),
    ))


def test_headings_code_quote_rule() -> None:
    blocks = parse("## Title\n\n```python  extra words\nx = 1\n```\n\n> quoted\n\n---\n\n    indented")
    assert blocks == (
        Heading(2, (Text("Title"),)),
        CodeBlock("x = 1", "python"),
        BlockQuote((Paragraph((Text("quoted"),)),)),
        ThematicBreak(),
        CodeBlock("indented", ""),
    )


def test_code_language_is_sanitised() -> None:
    assert parse('```"><script>\nx\n```') == (CodeBlock("x", ""),)
    assert parse("```c++\nx\n```") == (CodeBlock("x", "c++"),)
    assert parse("```" + "a" * 100 + "\nx\n```") == (CodeBlock("x", "a" * 32),)


def test_setext_heading_is_one_line_even_inside_styles() -> None:
    (heading,) = parse("~~one\ntwo~~\n===")
    assert heading == Heading(1, (Strike((Text("one two"),)),))


def test_nested_lists_keep_numbers_and_tightness() -> None:
    (outer,) = parse("3. three\n4. four\n   - a\n   - b\n\n     more b")
    assert isinstance(outer, ListBlock) and outer.ordered and outer.tight
    assert [item.number for item in outer.items] == [3, 4]
    inner = outer.items[1].blocks[1]
    assert isinstance(inner, ListBlock) and not inner.ordered and not inner.tight
    assert inner.items[1] == ListItem(None, (Paragraph((Text("b"),)), Paragraph((Text("more b"),))))


def test_table_alignments_and_ragged_rows() -> None:
    (table,) = parse("| a | b | c |\n|:--|:-:|--:|\n| 1 |\n| 1 | 2 | 3 | 4 |")
    assert isinstance(table, Table)
    assert table.aligns == (Align.LEFT, Align.CENTER, Align.RIGHT)
    assert table.rows[0] == ((Text("1"),), (), ())
    assert len(table.rows[1]) == 3


def test_raw_html_stays_text() -> None:
    assert parse("<b>bold?</b> <script>alert(1)</script>") == (
        Paragraph((Text("<b>bold?</b> <script>alert(1)</script>"),)),
    )
    assert parse("<div>\nblock\n</div>") == (
        Paragraph((Text("<div>"), LineBreak(), Text("block"), LineBreak(), Text("</div>"))),
    )


def test_dangerous_link_targets_are_not_links() -> None:
    (para,) = parse("[x](javascript:alert(1)) [y](vbscript:z) [z](file:///etc/passwd)")
    assert isinstance(para, Paragraph)
    assert not any(isinstance(node, Link) for node in para.inlines)


def test_image_inside_link_becomes_its_alt_text() -> None:
    (para,) = parse("[![badge](https://img/b.svg)](https://ci/)")
    assert para == Paragraph((Link("https://ci/", (Text("badge"),)),))


def test_entities_are_decoded_once() -> None:
    assert parse("&amp;lt; &copy; &#x41;") == (Paragraph((Text("&lt; © A"),)),)


def test_controls_are_dropped_and_surrogates_repaired() -> None:
    assert parse("a\x00b\x07c\x1bd\r\ne") == (Paragraph((Text("abcd"), LineBreak(), Text("e"))),)
    assert parse("x\ud800y") == (Paragraph((Text("x\ufffdy"),)),)
    assert parse("\ud83d\ude00") == (Paragraph((Text("😀"),)),)


def test_nothing_visible_parses_to_nothing() -> None:
    assert parse("") == ()
    assert parse(" \n\t\n ") == ()
    assert parse("[ref]: https://example.com") == ()


def test_unbalanced_markup_is_literal() -> None:
    assert parse("**a [b]( `c") == (Paragraph((Text("**a [b]( `c"),)),)
    assert parse("```\nnever closed") == (CodeBlock("never closed", ""),)


def test_plain_text_helpers() -> None:
    docs = Link("https://x.org", (Strong((Text("docs"),)),))
    nodes = (Text("see "), docs, Text(" "), Image("https://i/p.png", "pic"))
    assert inline_text(nodes) == "see docs pic"
    assert inline_text(nodes, with_urls=True) == "see docs (https://x.org) pic (https://i/p.png)"
    assert link_text("https://x.org", "https://x.org") == "https://x.org"
    assert link_text("me@x.org", "mailto:me@x.org") == "me@x.org"
    assert link_text("", "https://x.org") == "https://x.org"
    assert block_text(parse("- a\n- b\n\n1. c")[0]) == "- a\n- b"
    assert text_paragraph("a\nb") == Paragraph((Text("a"), LineBreak(hard=True), Text("b")))
    assert text_paragraph(" \n ") is None


def test_blocks_with_nothing_visible_are_dropped() -> None:
    for markdown in ("#", ">", "```\n  \n```", "| |\n|-|", "`" * 10):
        assert parse(markdown) == (), markdown


def test_nesting_deeper_than_the_parser_allows_is_kept_as_plain_text() -> None:
    deep = "> " * 150 + "deep text"
    (paragraph,) = parse(deep)
    assert paragraph == Paragraph((Text(deep),))
    assert isinstance(parse("> " * 90 + "x")[0], BlockQuote)
