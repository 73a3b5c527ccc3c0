"""Property tests: hostile text, every dialect and unit, the splitter's invariants hold."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from render_checks import html_text, is_subsequence, shown_text, visible_text, without_space

from gateway.core.capabilities import Dialect, TextUnit
from gateway.render import MIN_LIMIT, measure
from gateway.render.dialects import renderer_for
from gateway.render.markdown import parse
from gateway.render.split import split_blocks

HOSTILE_CHARS = (
    "abcXYZ019 \n\t"
    "*_`[]()<>!#&;|~-+=.:/\\\"'"
    "\u00a0\u200b\u200d\ufeff\u202e\u202c\u200f"
    "שלוםمرحبا漢字かな한"
    "\u1100\u1161\u11a8"
    "\u0301\u0300\u20dd"
    "😀👍🏽🇯🇵𝔘𐍈"
)
FRAGMENTS = (
    "**", "*", "_", "~~", "`", "```", "```python\n", "\n```\n", "[a](", "](http://x.y/z)",
    "[link text](https://example.com/p?q=1&r=<2>)", "<b>", "</b>", "<script>alert(1)</script>", "&amp;", "&lt;",
    "&#x1F600;", "> ", "\n> ", "- ", "\n- ", "\n  - ", "1. ", "\n2) ", "# ", "\n## ", "\n\n", "    ", "  \n", "\\\n",
    "| a | b |\n|:--|--:|\n| c | d |\n", "![img](http://i.example/x.png)", "<http://auto.link/x>",
    "[js](javascript:alert(1))", "👨‍👩‍👧‍👦", "🏳️‍🌈", "e\u0301\u0301", "\u202eevil\u202c", "***", "---\n",
    "[ref]: http://r.example\n", "[ref]", "> > > > > > > > > > > > ", "- - - - - - - - - - ",
)
hostile_text = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(alphabet=HOSTILE_CHARS, max_size=30)), max_size=80
).map("".join)


def check_parts(markdown: str, dialect: Dialect, unit: TextUnit, limit: int) -> list[str]:
    blocks = parse(markdown)
    renderer = renderer_for(dialect)
    parts = split_blocks(blocks, renderer, limit, unit)
    for part in parts:
        assert measure(part, unit) <= limit, (limit, unit, part)
        assert part.strip(), parts
        if dialect in (Dialect.HTML, Dialect.TELEGRAM_HTML):
            html_text(part, dialect)
    expected = without_space(visible_text(blocks))
    shown = without_space("".join(shown_text(part, dialect) for part in parts))
    assert is_subsequence(expected, shown), (expected, shown)
    if blocks and expected:
        assert parts
    return parts


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    markdown=hostile_text,
    dialect=st.sampled_from(list(Dialect)),
    unit=st.sampled_from(list(TextUnit)),
    limit=st.integers(MIN_LIMIT, 120),
)
def test_hostile_text_small_limits(markdown: str, dialect: Dialect, unit: TextUnit, limit: int) -> None:
    check_parts(markdown, dialect, unit, limit)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    markdown=hostile_text,
    dialect=st.sampled_from(list(Dialect)),
    unit=st.sampled_from(list(TextUnit)),
    limit=st.integers(120, 2000),
)
def test_hostile_text_platform_like_limits(markdown: str, dialect: Dialect, unit: TextUnit, limit: int) -> None:
    check_parts(markdown, dialect, unit, limit)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    chunk=hostile_text.filter(lambda text: text.strip()),
    repeat=st.integers(50, 400),
    dialect=st.sampled_from(list(Dialect)),
    unit=st.sampled_from(list(TextUnit)),
    limit=st.sampled_from([64, 500, 2000, 4096]),
)
def test_huge_inputs(chunk: str, repeat: int, dialect: Dialect, unit: TextUnit, limit: int) -> None:
    check_parts((chunk * repeat)[:40_000], dialect, unit, limit)


CLUSTERS = (
    "a", "Z", "7", "漢", "か", "😀", "👍🏽", "👨\u200d👩\u200d👧\u200d👦", "🏳\ufe0f\u200d🌈", "🇯🇵", "🇫🇷", "e\u0301\u0302",
    "\u1100\u1161\u11a8", "한", "1\ufe0f\u20e3", "𝔘", "ש", "\u200b", "\u202e",
)


@settings(max_examples=120, deadline=None)
@given(
    clusters=st.lists(st.sampled_from(CLUSTERS), min_size=1, max_size=120),
    unit=st.sampled_from(list(TextUnit)),
    limit=st.integers(32, 100),
)
def test_cuts_fall_between_grapheme_clusters(clusters: list[str], unit: TextUnit, limit: int) -> None:
    text = "".join(clusters)
    boundaries = {0}
    for cluster in clusters:
        boundaries.add(max(boundaries) + len(cluster))
    parts = split_blocks(parse(text), renderer_for(Dialect.PLAIN), limit, unit)
    assert "".join(parts) == text
    offset = 0
    for part in parts:
        assert measure(part, unit) <= limit
        offset += len(part)
        assert offset in boundaries, (parts, offset)


@settings(max_examples=100, deadline=None)
@given(markdown=hostile_text, dialect=st.sampled_from(list(Dialect)))
def test_one_part_when_the_limit_is_generous(markdown: str, dialect: Dialect) -> None:
    blocks = parse(markdown)
    renderer = renderer_for(dialect)
    whole = renderer.render(blocks)
    parts = split_blocks(blocks, renderer, 1_000_000, TextUnit.BYTES)
    assert parts == ([whole] if whole.strip() else [])


@settings(max_examples=150, deadline=None)
@given(markdown=hostile_text)
def test_markdown_output_is_stable_markdown(markdown: str) -> None:
    once = renderer_for(Dialect.MARKDOWN).render(parse(markdown))
    assert renderer_for(Dialect.MARKDOWN).render(parse(once)) == once


@pytest.mark.parametrize("markdown", ["******_**[a]()", "**_**[a]()", "[a]()**_**", "*:*[x](javascript:y)"])
def test_a_style_beside_a_link_written_as_text_reads_back(markdown: str) -> None:
    """A link with an unsafe or empty target is written as its text, which may put a letter right
    against a ``**`` run whose edge is punctuation: then the style goes, so the output still reads back."""
    once = renderer_for(Dialect.MARKDOWN).render(parse(markdown))
    assert renderer_for(Dialect.MARKDOWN).render(parse(once)) == once
