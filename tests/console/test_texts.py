"""The console's words: complete in every language, each one used, the language taken from the browser."""

from __future__ import annotations

import re

import pytest

from gateway.console import pages, texts
from gateway.core.phrases import LANGUAGES


def test_every_text_is_in_every_language_and_used_somewhere():
    table = texts.texts()
    assert set(table) == set(LANGUAGES)
    keys = set(table["en"])
    assert all(set(table[language]) == keys for language in LANGUAGES)
    sources = "".join(path.read_text(encoding="utf-8") for path in (pages.HERE / "templates").glob("*.html"))
    sources += "".join(path.read_text(encoding="utf-8") for path in pages.HERE.glob("*.py"))  # pages and the areas
    unused = {key for key in keys if not re.search(rf"""(t\.{key}\b|["']{key}["'])""", sources)}
    assert unused == {"role_administrator", "role_teacher"}  # looked up as "role_" + the role's value
    assert all(f"role_{role.value}" in keys for role in pages.Role)


@pytest.mark.parametrize(("header", "language"), [
    ("zh-CN,zh;q=0.9", "zh-Hans"), ("zh", "zh-Hans"), ("zh-TW", "en"), ("en-GB", "en"), ("fr", "en"), ("", "en"), (None, "en"),
])
def test_the_language_is_the_browsers_first_choice_when_the_console_speaks_it(header, language):
    assert texts.language_of(header) == language
