"""Markdown output keeps nested and adjacent emphasis: delimiter runs must not merge on re-parse."""

from __future__ import annotations

import pytest

from gateway.core.capabilities import Dialect
from gateway.render.dialects import renderer_for
from gateway.render.markdown import parse


def render(markdown: str) -> str:
    return renderer_for(Dialect.MARKDOWN).render(parse(markdown))


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        ("**a*b*c**", "**a*b*c**"),
        ("*a**b**c*", "*a**b**c*"),
        ("_a_*b*", "*a*_b_"),  # "*a**b*" would be one emphasis
        ("_a_*b*c", "_a_*b*c"),  # "_" cannot close before "c", so the first run takes it
        ("***a***", "***a***"),
        ("**a**_b_", "**a**_b_"),
        ("*a*_b_*c*", "*a*_b_*c*"),
    ],
)
def test_markdown_emphasis_runs_do_not_merge(markdown: str, expected: str) -> None:
    once = render(markdown)
    assert once == expected
    assert parse(once) == parse(markdown)
    assert render(once) == once


@pytest.mark.parametrize(
    ("markdown", "expected"),
    [
        # bold inside bold right after a digit: "0**__0__**" would not be bold at all (found by the property test)
        ("0****0****", "0**0**"),
        ("****0****0", "**0**0"),
        ("*_x_*", "*x*"),
        # an emphasis inside an emphasis, then another one: found by a stress run ("*\_0**0*\*" re-parsed differently)
        ("*_*0***0**", "*\\_0*_0_\\*"),
        # three levels: "*:_0:*:*_*" closes the outer run at the innermost opener (found by the property test)
        ("**:*0:_:_**", "\\**:0::*"),
    ],
)
def test_a_style_nested_in_itself_is_spelled_once(markdown: str, expected: str) -> None:
    """Italic inside italic reads as italic: spelling it again only gives CommonMark's delimiter rules a way to pair wrongly."""
    once = render(markdown)
    assert once == expected
    assert render(once) == once


def test_underscores_do_not_close_before_a_combining_mark() -> None:
    # "_0_\u0300" is not emphasis: a combining mark is inside a word (found by the property test)
    once = render("_0_*0*\u0300")
    assert once == "_0_*0*\u0300"
    assert parse(once) == parse("_0_*0*\u0300")


