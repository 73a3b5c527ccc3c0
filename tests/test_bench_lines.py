"""bench/lines.py counts what the closing notes report: prose (comments, docstrings) is not code."""

from __future__ import annotations

from bench.lines import Count, count_source

MODULE = '''"""A module docstring
over two lines."""

import os  # a trailing comment keeps its code line


def f() -> str:
    """A function's docstring."""
    # a comment line
    return "a string that is code"
'''


def test_docstrings_comments_and_blank_lines_are_not_code():
    assert count_source(MODULE) == Count(raw=10, non_blank=7, code=3)


def test_an_expression_string_on_its_own_line_inside_a_call_is_code():
    assert count_source('x = f(\n    "text",\n)\n') == Count(raw=3, non_blank=3, code=3)
