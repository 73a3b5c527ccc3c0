"""``$$...$$`` is one math span: its TeX is never read as Markdown, and each dialect shows it as typed."""

from __future__ import annotations

import pytest

from gateway.core.capabilities import Dialect
from gateway.render import render_markdown
from gateway.render.dialects import renderer_for
from gateway.render.markdown import Math, Paragraph, Text, parse

TEX = "\\{x_1 \\mid x > 0\\} \\\\ a*b*c"


def test_the_tex_inside_is_kept_whole_escapes_and_emphasis_marks_included():
    [paragraph] = parse(f"so $${TEX}$$ holds")
    assert paragraph == Paragraph((Text("so "), Math(TEX), Text(" holds")))


@pytest.mark.parametrize("text", ["price $5", "a $$ b", "$$$x$$$ no", "$$$$", "`$$a_b$$` is code"])
def test_dollars_that_open_no_span_stay_text(text):
    assert not any(isinstance(node, Math) for block in parse(text) for node in getattr(block, "inlines", ()))


def test_the_markdown_dialect_writes_it_back_verbatim_and_reads_it_again_the_same():
    once = render_markdown(f"so $${TEX}$$ holds, *really*", Dialect.MARKDOWN)
    assert f"$${TEX}$$" in once
    assert renderer_for(Dialect.MARKDOWN).render(parse(once)) == once


@pytest.mark.parametrize("dialect, shown", [
    (Dialect.TELEGRAM_HTML, "$$x &lt; y$$"), (Dialect.HTML, "$$x &lt; y$$"), (Dialect.PLAIN, "$$x < y$$"),
])
def test_other_dialects_show_it_as_text_in_their_own_escaping(dialect, shown):
    assert shown in render_markdown("$$x < y$$", dialect)
