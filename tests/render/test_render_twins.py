"""The plain twin: each part's plain text comes from the same blocks as its markup, in the same pass."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_render_properties import hostile_text

from gateway.core.capabilities import ChannelCapabilities, Dialect, TextUnit
from gateway.render import render_reply, render_twins
from gateway.render.dialects import PlainRenderer
from gateway.render.markdown import parse


def caps(dialect: Dialect, limit: int = 4096) -> ChannelCapabilities:
    return ChannelCapabilities(platform="t", text_limit=limit, text_unit=TextUnit.UTF16, dialect=dialect,
                               elements=frozenset({"text", "link"}))


def test_an_html_part_has_a_readable_plain_twin_with_its_link_targets():
    markdown = "Read **this** [guide](https://x.org/g):\n\n- a\n- b\n\n1 < 2"
    [twin] = render_twins(markdown, caps(Dialect.HTML))
    assert "<strong>this</strong>" in twin.text and '<a href="https://x.org/g">' in twin.text
    assert twin.plain == PlainRenderer().render(parse(markdown))
    assert "guide (https://x.org/g)" in twin.plain and "<" not in twin.plain.replace("1 < 2", "")
    assert "&lt;" not in twin.plain and "1 < 2" in twin.plain


def test_each_split_part_gets_the_twin_of_its_own_blocks():
    markdown = "\n\n".join(f"Paragraph **{n}** with some words to fill it." for n in range(12))
    twins = render_twins(markdown, caps(Dialect.TELEGRAM_HTML, limit=120))
    assert len(twins) > 2
    for twin in twins:
        assert "<b>" in twin.text and "<b>" not in twin.plain and "**" not in twin.plain
    plain = "\n".join(t.plain for t in twins)
    assert all(f"Paragraph {n} with" in plain for n in range(12))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile_text, st.sampled_from(list(Dialect)), st.integers(min_value=40, max_value=400))
def test_twins_are_the_rendered_parts_one_for_one(markdown, dialect, limit):
    twins = render_twins(markdown, caps(dialect, limit))
    assert [t.text for t in twins] == render_reply(markdown, caps(dialect, limit))
    if dialect is Dialect.PLAIN:
        assert all(t.plain == t.text for t in twins)
