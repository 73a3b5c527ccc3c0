"""Each dialect's renderer: escaping, links, code, lists, headings, tables, images, raw HTML."""

from __future__ import annotations

import pytest
from render_checks import html_text

from gateway.core.capabilities import Dialect
from gateway.render import render_markdown
from gateway.render.dialects import renderer_for
from gateway.render.markdown import Inline, LineBreak, Link, Paragraph, Text, parse

HOSTILE = 'a < b && c > d "q" <b>x</b> <script>alert(1)</script> &amp;lt; &copy;'
LINKS = "see [the **docs**](https://x.org/a?b=1&c=2), <https://auto.org>, [rel](/path) and <me@x.org>"
CODE = 'use `a < b` here\n\n```python\nif a < b && c:\n    print("x")\n```'
LISTS = "- one\n- two\n  1. a\n  2. b\n     - deep\n- three"
SHOWCASE = (
    "# Title *it*\n\n| Name | Score |\n|:-----|------:|\n| 漢字 | 9 |\n| Bob | 10 |\n\n"
    "![a cat](https://img.example/cat.png)"
)


def render(markdown: str, dialect: Dialect) -> str:
    return render_markdown(markdown, dialect)


# --------------------------------------------------------------------------- plain


def test_plain_is_readable_text() -> None:
    assert render(HOSTILE, Dialect.PLAIN) == 'a < b && c > d "q" <b>x</b> <script>alert(1)</script> &lt; ©'
    assert render(LINKS, Dialect.PLAIN) == (
        "see the docs (https://x.org/a?b=1&c=2), https://auto.org, rel (/path) and me@x.org"
    )
    assert render(CODE, Dialect.PLAIN) == 'use a < b here\n\nif a < b && c:\n    print("x")'
    assert render(LISTS, Dialect.PLAIN) == "- one\n- two\n  1. a\n  2. b\n     - deep\n- three"
    assert render(SHOWCASE, Dialect.PLAIN) == (
        "Title it\n\n"
        "Name | Score\n-----+------\n漢字 |     9\nBob  |    10\n\n"
        "a cat (https://img.example/cat.png)"
    )
    assert render("> quoted\n>\n> > nested\n\n---", Dialect.PLAIN) == "> quoted\n>\n> > nested\n\n---"


# --------------------------------------------------------------------------- markdown


def test_markdown_escapes_everything_literal() -> None:
    assert render(HOSTILE, Dialect.MARKDOWN) == (
        'a \\< b && c \\> d "q" \\<b\\>x\\</b\\> \\<script\\>alert(1)\\</script\\> \\&lt; ©'
    )
    def paragraph(*lines: str) -> Paragraph:
        inlines: list[Inline] = []
        for line in lines:
            inlines += [LineBreak(), Text(line)]
        return Paragraph(tuple(inlines[1:]))

    lines = ["1. one", "- two", "# three", "+ four", "===", "    five", "2) six", "snake_case *star*"]
    out = renderer_for(Dialect.MARKDOWN).render([paragraph(*lines)])
    assert out == "1\\. one\n\\- two\n\\# three\n\\+ four\n\\===\nfive\n2\\) six\nsnake\\_case \\*star\\*"
    lines[5] = "five"  # leading spaces would make an indented code block
    assert parse(out) == (paragraph(*lines),)


def test_markdown_links_code_lists_and_showcase() -> None:
    assert render(LINKS, Dialect.MARKDOWN) == (
        "see [the **docs**](https://x.org/a?b=1&c=2), <https://auto.org>, rel (/path) and [me@x.org](mailto:me@x.org)"
    )
    assert render("``a ` b`` and ```` ``` ````", Dialect.MARKDOWN) == "``a ` b`` and ```` ``` ````"
    assert render('```\nprint("```")\n```', Dialect.MARKDOWN) == '````\nprint("```")\n````'
    assert render(LISTS, Dialect.MARKDOWN) == LISTS
    assert render(SHOWCASE, Dialect.MARKDOWN) == (
        "# Title *it*\n\n| Name | Score |\n| :--- | ---: |\n| 漢字 | 9 |\n| Bob | 10 |\n\n"
        "![a cat](https://img.example/cat.png)"
    )


@pytest.mark.parametrize(
    "markdown",
    [
        HOSTILE, CODE, LISTS, SHOWCASE,
        "see [the **docs**](https://x.org/a?b=1&c=2), <https://auto.org> and <me@x.org>",
        "- a\n\n* b",  # two lists side by side stay two lists
        "para\n\n***\n\n- ***",  # rules that would turn into headings or items
        "a  \nb\\\nc",  # hard breaks
        "text!\n[link](https://x.org)",  # "!" before a link is not an image
        "## heading #",  # a closing-sequence lookalike
        "1) one\n2) two\n\n10. ten",
        "> - quoted list\n>   with more\n\n> ```js\n> code\n> ```",
    ],
)
def test_markdown_output_parses_back_to_the_same_tree(markdown: str) -> None:
    once = parse(render(markdown, Dialect.MARKDOWN))
    assert once == parse(markdown)


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        # lists that each open their parent item share a line; one bullet repeated would be a thematic break
        ("- - - - - - - - - - *", "- * - * - * - * - * - "),
        ("- -", "- * "),
        ("+ - *", "- * - "),
        ("1. - - - *", "1. - * - * "),
        ("- - x\n- - y\n\n* - z", "- * x\n- * y\n\n* - z"),
        ("- - a\n  - - b", "- * a\n  * - b"),
        # real rules inside and after lists
        ("- * * *", "- ___"),
        ("1. - - -", "1. ___"),
        ("- a\n---", "- a\n\n___"),
        ("- a\n- - -", "- a\n\n___"),
    ],
)
def test_markdown_nested_bullets_do_not_become_rules(markdown: str, expected: str) -> None:
    once = render(markdown, Dialect.MARKDOWN)
    assert once == expected
    assert parse(once) == parse(markdown)
    assert render(once, Dialect.MARKDOWN) == once


# --------------------------------------------------------------------------- telegram


def test_telegram_escapes_and_uses_only_its_tags() -> None:
    out = render(HOSTILE, Dialect.TELEGRAM_HTML)
    assert out == (
        'a &lt; b &amp;&amp; c &gt; d "q" &lt;b&gt;x&lt;/b&gt; &lt;script&gt;alert(1)&lt;/script&gt; &amp;lt; ©'
    )
    html_text(out, Dialect.TELEGRAM_HTML)


def test_telegram_links_code_lists_showcase() -> None:
    assert render(LINKS, Dialect.TELEGRAM_HTML) == (
        'see <a href="https://x.org/a?b=1&amp;c=2">the <b>docs</b></a>, '
        '<a href="https://auto.org">https://auto.org</a>,'
        ' rel (/path) and <a href="mailto:me@x.org">me@x.org</a>'
    )
    assert render(CODE, Dialect.TELEGRAM_HTML) == (
        'use <code>a &lt; b</code> here\n\n<pre><code class="language-python">if a &lt; b &amp;&amp; c:\n'
        '    print("x")</code></pre>'
    )
    assert render("```\nno language\n```", Dialect.TELEGRAM_HTML) == "<pre>no language</pre>"
    assert render(LISTS, Dialect.TELEGRAM_HTML) == "• one\n• two\n  1. a\n  2. b\n     • deep\n• three"
    assert render(SHOWCASE, Dialect.TELEGRAM_HTML) == (
        "<b>Title <i>it</i></b>\n\n<pre>Name | Score\n-----+------\n漢字 |     9\nBob  |    10</pre>\n\n"
        '<a href="https://img.example/cat.png">a cat</a>'
    )


def test_telegram_respects_entity_nesting_rules() -> None:
    # code may not sit inside b/i/s or a link; blockquotes may not nest
    assert render("**bold `code`** [`c`](https://x.org)", Dialect.TELEGRAM_HTML) == (
        '<b>bold code</b> <a href="https://x.org">c</a>'
    )
    assert render("> outer\n>\n> > inner", Dialect.TELEGRAM_HTML) == "<blockquote>outer\n\n&gt; inner</blockquote>"


def test_telegram_link_targets_are_allowlisted() -> None:
    assert render("[me](tg://user?id=1)", Dialect.TELEGRAM_HTML) == '<a href="tg://user?id=1">me</a>'
    assert render('[x](https://a.org/"onmouseover=")', Dialect.TELEGRAM_HTML) == (
        '<a href="https://a.org/%22onmouseover=%22">x</a>'
    )


# --------------------------------------------------------------------------- html


def test_html_is_escaped_and_allowlisted() -> None:
    out = render(HOSTILE, Dialect.HTML)
    assert out == (
        '<p>a &lt; b &amp;&amp; c &gt; d "q" &lt;b&gt;x&lt;/b&gt; &lt;script&gt;alert(1)&lt;/script&gt; &amp;lt; ©</p>'
    )
    for sample in (HOSTILE, LINKS, CODE, LISTS, SHOWCASE, "> q\n>\n> > n\n\n---\n\n1. a\n\n   b"):
        html_text(render(sample, Dialect.HTML), Dialect.HTML)


def test_html_structure() -> None:
    assert render(LISTS, Dialect.HTML) == (
        "<ul>\n<li>one</li>\n<li>two\n<ol>\n<li>a</li>\n<li>b\n<ul>\n<li>deep</li>\n</ul></li>\n</ol></li>\n"
        "<li>three</li>\n</ul>"
    )
    assert render("3. c\n4. d\n\n   more", Dialect.HTML) == (
        '<ol start="3">\n<li><p>c</p></li>\n<li><p>d</p>\n<p>more</p></li>\n</ol>'
    )
    assert render(SHOWCASE, Dialect.HTML) == (
        "<h1>Title <em>it</em></h1>\n<table>\n<thead>\n<tr><th>Name</th><th>Score</th></tr>\n</thead>\n<tbody>\n"
        "<tr><td>漢字</td><td>9</td></tr>\n<tr><td>Bob</td><td>10</td></tr>\n</tbody>\n</table>\n"
        '<p><a href="https://img.example/cat.png">a cat</a></p>'
    )
    assert render("a  \nb\n\n---", Dialect.HTML) == "<p>a<br>\nb</p>\n<hr>"


def test_html_drops_links_it_cannot_vouch_for() -> None:
    assert render("[rel](/path) [ftp](ftp://x.org/f)", Dialect.HTML) == "<p>rel (/path) ftp (ftp://x.org/f)</p>"


# --------------------------------------------------------------------------- slack


def test_slack_escapes_only_its_three_characters() -> None:
    assert render(HOSTILE, Dialect.SLACK_MRKDWN) == (
        'a &lt; b &amp;&amp; c &gt; d "q" &lt;b&gt;x&lt;/b&gt; &lt;script&gt;alert(1)&lt;/script&gt; &amp;lt; ©'
    )
    # a model cannot smuggle a broadcast or a user mention through
    assert render("<!channel> <@U123>", Dialect.SLACK_MRKDWN) == "&lt;!channel&gt; &lt;@U123&gt;"


def test_slack_marks_links_code() -> None:
    assert render("**b** *i* ~~s~~ `c` ***bi***", Dialect.SLACK_MRKDWN) == "*b* _i_ ~s~ `c` _*bi*_"
    assert render(LINKS, Dialect.SLACK_MRKDWN) == (
        "see <https://x.org/a?b=1&amp;c=2|the docs>, <https://auto.org>, rel (/path) and <mailto:me@x.org|me@x.org>"
    )
    assert render("[a|b](https://x.org/p|q)", Dialect.SLACK_MRKDWN) == "<https://x.org/p%7Cq|a|b>"
    assert render(CODE, Dialect.SLACK_MRKDWN) == (
        'use `a &lt; b` here\n\n```\nif a &lt; b &amp;&amp; c:\n    print("x")\n```'
    )
    assert render(SHOWCASE, Dialect.SLACK_MRKDWN).startswith("*Title _it_*\n\n```\nName | Score\n")
    assert render(SHOWCASE, Dialect.SLACK_MRKDWN).endswith("<https://img.example/cat.png|a cat>")


def test_slack_and_whatsapp_do_not_nest_a_style_in_itself() -> None:
    assert render("# Big **bold** title", Dialect.SLACK_MRKDWN) == "*Big bold title*"
    assert render("# Big **bold** title", Dialect.WHATSAPP) == "*Big bold title*"


def test_marks_keep_edge_spaces_outside() -> None:
    assert render("a** b **c", Dialect.WHATSAPP) == "a** b **c"  # not emphasis in CommonMark either
    assert render("a *b `c `* d", Dialect.WHATSAPP) == "a _b ```c```_  d"


# --------------------------------------------------------------------------- whatsapp


def test_whatsapp_markup() -> None:
    assert render("**b** *i* ~~s~~ `c`", Dialect.WHATSAPP) == "*b* _i_ ~s~ ```c```"
    assert render(HOSTILE, Dialect.WHATSAPP) == render(HOSTILE, Dialect.PLAIN)
    assert render(LINKS, Dialect.WHATSAPP) == render(LINKS, Dialect.PLAIN)
    assert render(CODE, Dialect.WHATSAPP) == 'use ```a < b``` here\n\n```\nif a < b && c:\n    print("x")\n```'
    assert render(SHOWCASE, Dialect.WHATSAPP).endswith("a cat (https://img.example/cat.png)")


# --------------------------------------------------------------------------- all


@pytest.mark.parametrize("dialect", list(Dialect))
def test_every_dialect_has_a_renderer(dialect: Dialect) -> None:
    renderer = renderer_for(dialect)
    assert renderer.dialect is dialect
    assert renderer_for(dialect) is not renderer


@pytest.mark.parametrize("dialect", list(Dialect))
def test_javascript_never_becomes_a_link(dialect: Dialect) -> None:
    markdown = "[x](javascript:alert(1)) <javascript:alert(1)> [y](JAVASCRIPT:alert(1)) ![i](data:text/html,x)"
    out = render(markdown, dialect)
    if dialect in (Dialect.HTML, Dialect.TELEGRAM_HTML):
        html_text(out, dialect)  # checks every href against the scheme allowlist
    elif dialect is Dialect.MARKDOWN:
        (paragraph,) = parse(out)
        assert isinstance(paragraph, Paragraph)
        assert not any(isinstance(node, Link) for node in paragraph.inlines)
    elif dialect is Dialect.SLACK_MRKDWN:
        assert "<javascript" not in out.lower() and "<data" not in out
    assert "alert(1)" in out  # shown, as text


@pytest.mark.parametrize("markdown", ["- **\n  - ```", "- **\n  - # "])
def test_markdown_drops_an_empty_item_after_a_paragraph(markdown: str) -> None:
    # the emptied item would read back as a heading's underline: "\\*\\*\n  -" (found by the property test)
    once = render(markdown, Dialect.MARKDOWN)
    assert once == "- \\*\\*"
    assert render(once, Dialect.MARKDOWN) == once


def test_markdown_blank_list_items_stay_tight() -> None:
    # the "\u00a0" paragraph is dropped, so it must not make the list loose ("- \n\n- " parses back tight)
    once = render("- \u00a0\n\n- ", Dialect.MARKDOWN)
    assert once == "- \n- "
    assert render(once, Dialect.MARKDOWN) == once
