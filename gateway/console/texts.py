"""The console's words in the reader's language: ``texts.toml``, checked like the phrase catalogue.

The console speaks the languages the learner-facing catalogue is complete in
(:data:`gateway.core.phrases.LANGUAGES`) and picks one per request from the browser's
``Accept-Language`` (the kit's reader of that header), mapped by the same
:func:`~gateway.core.phrases.catalogued` the pipeline uses; anything else reads English.  Every
text must exist in every language with the English placeholders, or the import fails -- never a page.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path

from gateway.core.errors import ConfigError
from gateway.core.phrases import ENGLISH, LANGUAGES, catalogued, placeholders
from gateway.languages import preferred_language

CATALOGUE = Path(__file__).with_name("texts.toml")


@cache
def texts() -> dict[str, dict[str, str]]:
    """language -> key -> text, the whole table checked."""
    raw = tomllib.loads(CATALOGUE.read_text(encoding="utf-8"))
    table: dict[str, dict[str, str]] = {language: {} for language in LANGUAGES}
    for key, entry in raw.items():
        if not isinstance(entry, dict) or set(entry) != set(LANGUAGES):
            raise ConfigError(f"{CATALOGUE.name}: [{key}] needs exactly {', '.join(LANGUAGES)}")
        expected = placeholders(entry[ENGLISH])
        for language, text in entry.items():
            if not isinstance(text, str) or not text.strip() or placeholders(text) != expected:
                raise ConfigError(f"{CATALOGUE.name}: [{key}] {language} must keep the fields {sorted(expected)} of the English")
            table[language][key] = text
    return table


def language_of(accept_language: str | None) -> str:
    """The catalogue's language for a browser's ``Accept-Language``: its first choice if we speak it, else English."""
    return catalogued(preferred_language(accept_language)) or ENGLISH


def words(language: str) -> dict[str, str]:
    return texts().get(language, texts()[ENGLISH])


texts()  # a broken catalogue fails at import, where the operator sees it
