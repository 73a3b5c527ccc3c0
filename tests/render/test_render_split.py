"""The splitter: limits in every unit, structure-aware cuts, valid markup in every part."""

from __future__ import annotations

import re

import pytest
from render_checks import html_text

from gateway.core.capabilities import ChannelCapabilities, Dialect, TextUnit, platform_catalog
from gateway.render import MIN_LIMIT, measure, render_reply
from gateway.render.dialects import renderer_for
from gateway.render.graphemes import is_boundary
from gateway.render.markdown import parse
from gateway.render.split import split_blocks


def caps(dialect: Dialect = Dialect.PLAIN, limit: int = 100, unit: TextUnit = TextUnit.CHARS) -> ChannelCapabilities:
    return ChannelCapabilities(
        platform="test", text_limit=limit, text_unit=unit, dialect=dialect, elements=frozenset({"text"})
    )


def assert_parts_valid(parts: list[str], c: ChannelCapabilities) -> None:
    assert parts
    for part in parts:
        assert measure(part, c.text_unit) <= c.text_limit, part
        assert part.strip()
        if c.dialect in (Dialect.HTML, Dialect.TELEGRAM_HTML):
            html_text(part, c.dialect)


# --------------------------------------------------------------------------- measure


def test_measure_counts_in_each_unit() -> None:
    text = "a漢😀é\u0301"  # ASCII, CJK, astral emoji, e + combining accent
    assert measure(text, TextUnit.CHARS) == 5
    assert measure(text, TextUnit.RUNES) == 5
    assert measure(text, TextUnit.UTF16) == 6
    assert measure(text, TextUnit.BYTES) == 1 + 3 + 4 + 2 + 2
    assert measure("", TextUnit.BYTES) == 0
    assert measure("\ud800", TextUnit.UTF16) == 1  # a lone surrogate never crashes a measurement


# --------------------------------------------------------------------------- at the limit and one over


WORD = "漢😀x"  # 3 chars, 4 UTF-16 units, 8 bytes: the units disagree


@pytest.mark.parametrize("unit", list(TextUnit))
@pytest.mark.parametrize("dialect", list(Dialect))
def test_exactly_at_the_limit_is_one_part_one_over_is_two(unit: TextUnit, dialect: Dialect) -> None:
    text = " ".join([WORD] * 40)
    whole = render_reply(text, caps(dialect, 10_000, unit))
    assert len(whole) == 1
    size = measure(whole[0], unit)

    at_limit = render_reply(text, caps(dialect, size, unit))
    assert at_limit == whole

    over = render_reply(text + "y", caps(dialect, size, unit))
    assert len(over) == 2
    assert_parts_valid(over, caps(dialect, size, unit))


@pytest.mark.parametrize("unit", list(TextUnit))
def test_units_change_where_the_cut_falls(unit: TextUnit) -> None:
    text = " ".join([WORD] * 40)
    parts = render_reply(text, caps(Dialect.PLAIN, 100, unit))
    per_word = {TextUnit.CHARS: 4, TextUnit.RUNES: 4, TextUnit.UTF16: 5, TextUnit.BYTES: 9}[unit]
    assert len(parts[0].split()) == (100 + 1) // per_word
    assert " ".join(parts) == text


# --------------------------------------------------------------------------- structure


def test_prefers_block_boundaries() -> None:
    paragraphs = ["first paragraph " * 3, "second paragraph " * 3, "third paragraph " * 3]
    text = "\n\n".join(p.strip() for p in paragraphs)
    parts = render_reply(text, caps(limit=110))
    assert parts == [f"{paragraphs[0].strip()}\n\n{paragraphs[1].strip()}", paragraphs[2].strip()]


def test_prefers_line_breaks_then_words() -> None:
    text = "line one is here\nline two is here\nline three is here"
    assert render_reply(text, caps(limit=40)) == ["line one is here\nline two is here", "line three is here"]
    assert render_reply("alpha beta gamma delta", caps(limit=16)) == ["alpha beta gamma", "delta"]


def test_hard_cut_only_for_a_word_longer_than_a_part() -> None:
    parts = render_reply("tiny " + "x" * 50, caps(limit=20))
    assert parts == ["tiny xxxxxxxxxxxxxxx", "x" * 20, "x" * 15]


@pytest.mark.parametrize(
    ("dialect", "opening", "closing"),
    [
        (Dialect.MARKDOWN, "```python\n", "\n```"),
        (Dialect.TELEGRAM_HTML, '<pre><code class="language-python">', "</code></pre>"),
        (Dialect.HTML, '<pre><code class="language-python">', "</code></pre>"),
        (Dialect.SLACK_MRKDWN, "```\n", "\n```"),
        (Dialect.WHATSAPP, "```\n", "\n```"),
    ],
)
def test_split_code_block_is_closed_and_reopened(dialect: Dialect, opening: str, closing: str) -> None:
    lines = [f"    value_{i} = compute({i})  # step {i}" for i in range(40)]
    c = caps(dialect, 400)
    parts = render_reply("```python\n" + "\n".join(lines) + "\n```", c)
    assert len(parts) > 2
    assert_parts_valid(parts, c)
    shown: list[str] = []
    for part in parts:
        assert part.startswith(opening) and part.endswith(closing), part
        shown += part[len(opening) : -len(closing)].split("\n")
    assert shown == lines  # cut between lines, indentation kept


def test_code_line_longer_than_a_part_is_cut_and_reopened() -> None:
    parts = render_reply("```\n" + "y" * 100 + "\n```", caps(Dialect.MARKDOWN, 40))
    assert all(part.startswith("```\n") and part.endswith("\n```") for part in parts)
    assert "".join(part[4:-4] for part in parts) == "y" * 100


def test_html_parts_are_balanced_and_reopen_what_they_cut() -> None:
    text = (
        "# Heading\n\nSome **bold text that runs on and on and on and on across the cut** and *more* words.\n\n"
        "> a quote with a [link to somewhere](https://example.com/x) and\n> more lines of quoted text here\n\n"
        "1. first item\n2. second item with a long body of words to split\n   - nested bullet one\n"
        "   - nested bullet two\n3. third"
    )
    for dialect in (Dialect.HTML, Dialect.TELEGRAM_HTML):
        c = caps(dialect, 90)
        parts = render_reply(text, c)
        assert len(parts) > 4
        assert_parts_valid(parts, c)
    html_parts = render_reply(text, caps(Dialect.HTML, 90))
    assert html_parts[0].endswith("</strong></p>")  # bold closed at the cut ...
    assert html_parts[1].startswith("<p><strong>")  # ... and reopened
    assert any(part.startswith('<ol start="2">') for part in html_parts)  # the list reopened at its item number


def test_a_split_table_repeats_its_header() -> None:
    text = "| name | value |\n|---|--:|\n" + "".join(f"| row {i} | {i * 7} |\n" for i in range(30))
    for dialect in Dialect:
        c = caps(dialect, 300)
        parts = render_reply(text, c)
        assert len(parts) > 1
        assert_parts_valid(parts, c)
        assert all("name" in part and "value" in part for part in parts), dialect
        assert "".join(parts).count("row ") == 30


def test_a_link_is_not_cut_when_it_fits_a_part() -> None:
    text = " ".join(f"[link number {i}](https://example.com/{i})" for i in range(12))
    for dialect in (Dialect.TELEGRAM_HTML, Dialect.MARKDOWN, Dialect.SLACK_MRKDWN, Dialect.PLAIN):
        parts = render_reply(text, caps(dialect, 120))
        joined = "\n".join(parts)
        for i in range(12):
            assert f"link number {i}" in joined  # every link text stayed in one piece


def test_a_link_longer_than_a_part_is_split_with_its_target_repeated() -> None:
    text = "[" + " ".join(["word"] * 20) + "](https://example.com/p)"
    parts = render_reply(text, caps(Dialect.TELEGRAM_HTML, 60))
    assert len(parts) > 1
    assert all(part.startswith('<a href="https://example.com/p">') and part.endswith("</a>") for part in parts)


def test_a_url_longer_than_the_limit_degrades_to_text() -> None:
    url = "https://example.com/" + "p" * 200
    c = caps(Dialect.TELEGRAM_HTML, 64)
    parts = render_reply(f"see [docs]({url}) now", c)
    assert_parts_valid(parts, c)
    assert "".join(parts).replace(" ", "").find("p" * 150) >= 0


def test_grapheme_clusters_are_not_split() -> None:
    family = "👨\u200d👩\u200d👧\u200d👦"  # 11 UTF-16 units
    assert render_reply(family * 10, caps(limit=20, unit=TextUnit.UTF16)) == [family] * 10
    accented = "e\u0301" * 30
    parts = render_reply(accented, caps(limit=16, unit=TextUnit.BYTES))
    assert all(part == "e\u0301" * 5 for part in parts)
    flags = "🇯🇵🇫🇷🇩🇪" * 4
    for part in render_reply(flags, caps(limit=16, unit=TextUnit.UTF16)):
        assert len(part) % 2 == 0 and is_boundary(flags, 0)


FAMILY = "👨\u200d👩\u200d👧\u200d👦"  # 7 code points, 11 UTF-16 units, 25 bytes
TONED_FAMILY = "👨🏽\u200d👩🏽\u200d👧🏽\u200d👦🏽"  # 11 code points, 19 UTF-16 units, 41 bytes
TECHIE = "👩🏽\u200d💻"  # 4 code points, 15 bytes
RAINBOW = "🏳\ufe0f\u200d🌈"  # 4 code points, 6 UTF-16 units, 14 bytes
SCOTLAND = "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"  # tag flag: 7 code points, 28 bytes
KEYCAP = "1\ufe0f\u20e3"
THUMB = "👍🏽"  # emoji + skin-tone modifier: 2 code points, 8 bytes
ACUTE_CIRC = "e\u0301\u0302"
HANGUL = "\u1100\u1161\u11a8"  # conjoining jamo: one syllable


@pytest.mark.parametrize(
    ("clusters", "unit", "limit", "expected"),
    [
        # found by Hypothesis: 👍 was separated from its 🏽 although 👍🏽 fits whole into the next part
        (["a"] * 8 + [FAMILY, THUMB], TextUnit.BYTES, 32, ["aaaaaaaa", FAMILY, THUMB]),
        ([FAMILY, THUMB], TextUnit.BYTES, 29, [FAMILY, THUMB]),
        ([FAMILY, THUMB, THUMB], TextUnit.UTF16, 17, [FAMILY + THUMB, THUMB]),
        ([TONED_FAMILY, THUMB], TextUnit.BYTES, 45, [TONED_FAMILY, THUMB]),
        ([TECHIE, "🇯🇵"], TextUnit.BYTES, 19, [TECHIE, "🇯🇵"]),
        ([FAMILY, "🇯🇵"], TextUnit.BYTES, 29, [FAMILY, "🇯🇵"]),
        ([FAMILY, RAINBOW], TextUnit.UTF16, 16, [FAMILY, RAINBOW]),
        ([SCOTLAND, SCOTLAND], TextUnit.BYTES, 32, [SCOTLAND, SCOTLAND]),
        ([FAMILY, KEYCAP], TextUnit.BYTES, 26, [FAMILY, KEYCAP]),
        ([TONED_FAMILY, KEYCAP, KEYCAP], TextUnit.CHARS, 16, [TONED_FAMILY + KEYCAP, KEYCAP]),
        (["e" + "\u0301" * 6, ACUTE_CIRC], TextUnit.BYTES, 16, ["e" + "\u0301" * 6, ACUTE_CIRC]),
        ([FAMILY, ACUTE_CIRC, ACUTE_CIRC], TextUnit.UTF16, 16, [FAMILY + ACUTE_CIRC, ACUTE_CIRC]),
        ([FAMILY, HANGUL], TextUnit.BYTES, 28, [FAMILY, HANGUL]),
    ],
)
def test_a_long_cluster_opening_a_part_does_not_push_the_cut_inside_the_next(
    clusters: list[str], unit: TextUnit, limit: int, expected: list[str]
) -> None:
    # Every probe of the cut search landed inside the long first cluster, snapped back to an empty head,
    # and the search gave up on cluster boundaries for a code-point cut.
    text = "".join(clusters)
    parts = split_blocks(parse(text), renderer_for(Dialect.PLAIN), limit, unit)
    assert parts == expected
    assert all(measure(part, unit) <= limit for part in parts)
    offset = 0
    for part in parts[:-1]:
        offset += len(part)
        assert is_boundary(text, offset), (parts, offset)


def test_a_long_cluster_opening_a_code_part_does_not_push_the_cut_inside_the_next() -> None:
    fence = "```\n\n```"
    parts = render_reply(f"```\n{FAMILY}{THUMB}\n```", caps(Dialect.MARKDOWN, 29 + len(fence), TextUnit.BYTES))
    assert parts == [f"```\n{FAMILY}\n```", f"```\n{THUMB}\n```"]


def test_a_cluster_longer_than_a_part_falls_back_to_code_points() -> None:
    zalgo = "a" + "\u0301" * 40
    parts = render_reply(zalgo, caps(limit=16))
    assert "".join(parts) == zalgo
    assert all(len(part) <= 16 for part in parts)


def test_a_heading_stays_with_what_follows() -> None:
    text = "intro words here\n\n# Section\n\n" + "body " * 30
    parts = render_reply(text, caps(Dialect.MARKDOWN, 60))
    assert parts[0] == "intro words here"
    assert parts[1].startswith("# Section\n\nbody")


def test_list_item_continued_in_the_next_part() -> None:
    text = "1. one\n2. two\n\n   " + "more words " * 8 + "\n3. three"
    parts = render_reply(text, caps(Dialect.PLAIN, 40))
    assert parts[0].startswith("1. one\n\n2. two\n\n   more")  # a loose list, its item 2 begun in part 1
    assert any(part.startswith("   ") for part in parts[1:])  # the rest of item 2, indented, no second "2."
    assert parts[-1].endswith("3. three")
    assert "".join(parts).count("2.") == 1


def test_deep_nesting_at_a_tiny_limit_flattens_instead_of_crumbling() -> None:
    text = "> " * 30 + "- " * 10 + "deep text here and more words"
    parts = render_reply(text, caps(Dialect.MARKDOWN, 40))
    assert len(parts) <= 6
    assert all(measure(part, TextUnit.CHARS) <= 40 for part in parts)


def test_empty_and_invisible_replies_give_no_parts() -> None:
    for text in ("", "   \n\n\t", "[ref]: https://example.com"):
        assert render_reply(text, caps()) == []
    assert render_reply("```\n   \n```", caps(Dialect.PLAIN)) == []


def test_limits_below_the_minimum_are_refused() -> None:
    with pytest.raises(ValueError):
        render_reply("hello", caps(limit=MIN_LIMIT - 1))
    assert render_reply("hello", caps(limit=MIN_LIMIT)) == ["hello"]


@pytest.mark.parametrize("platform", sorted(platform_catalog()))
def test_every_declared_platform_gets_parts_within_its_limit(platform: str) -> None:
    c = platform_catalog()[platform].capabilities
    paragraph = "Grüße 漢字 😀👍🏽 " + " ".join(f"[w{i}](https://e.org/{i})" for i in range(30))
    text = "\n\n".join([f"## Part {i}\n\n{paragraph}\n\n```py\nprint({i})\n```" for i in range(80)])
    parts = render_reply(text, c)
    assert_parts_valid(parts, c)
    assert len(parts) >= 1 + len(text) // (c.text_limit * 2)
    assert all(re.search(r"Part \d+", part) for part in parts[:1])
