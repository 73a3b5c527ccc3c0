"""The phrases a learner reads that the gateway writes itself, in the learner's language.

Stopped notices, apologies, the pairing notice, budget messages, the /link and /forget answers, the
notes-only answer's notices, the hand-back notice -- and the personal WeChat login page a teacher
opens (``channels/weixin/ilink/page.py``) -- are not the model's words, so nothing
translates them on the way out: a Chinese-speaking partner that answered a failure in English would
break the one promise a language partner makes.  They live in data (``phrases.toml``, keyed by
phrase then language) and are read here, once, into a table checked at import: every
:class:`Phrase` in every language of :data:`LANGUAGES`, each with the same ``str.format``
placeholders as English.  A missing translation fails the import (and a test), never a
learner's turn.

:func:`language_for` is the one choice of language: the learner's platform locale when the partner
speaks it, else the partner's first language the catalogue has, else English.
"""

from __future__ import annotations

import string
import tomllib
from enum import Enum
from functools import cache
from pathlib import Path

from gateway.core.errors import ConfigError

CATALOGUE = Path(__file__).with_name("phrases.toml")
ENGLISH = "en"
CHINESE = "zh-Hans"
LANGUAGES = (ENGLISH, CHINESE)
"""The languages the catalogue is complete in; the first is the fallback of last resort."""

_SIMPLIFIED = frozenset({"zh", "zh-cn", "zh-sg", "zh-hans", "zh-hans-cn", "zh-hans-sg", "zh-my"})
"""Tags that mean Simplified Chinese.  zh-TW, zh-HK and zh-Hant are Traditional: the catalogue has no
Traditional text, so they take the partner's own language rather than a script the learner may not read."""


class Phrase(str, Enum):
    """One learner-facing sentence; the value is its key in ``phrases.toml``."""

    GREETING = "greeting"
    STOPPED = "stopped"
    NOTHING_TO_STOP = "nothing_to_stop"
    DELIVERY_APOLOGY = "delivery_apology"
    MODEL_APOLOGY = "model_apology"
    BUDGET_LEARNER = "budget_learner"
    BUDGET_PARTNER = "budget_partner"
    PAIRING_NOTICE = "pairing_notice"
    REFUSAL = "refusal"
    BROKE_OFF = "broke_off"
    GROUP_ONLY = "group_only"
    LINK_CODE = "link_code"
    LINKED = "linked"
    ALREADY_LINKED = "already_linked"
    BAD_CODE = "bad_code"
    LINK_BUSY = "link_busy"
    UNLINKED = "unlinked"
    NOT_LINKED = "not_linked"
    FORGET_ASK = "forget_ask"
    FORGOTTEN = "forgotten"
    FORGET_FIRST = "forget_first"
    NOTES_NO_MODEL = "notes_no_model"
    NOTES_MODEL_OFF = "notes_model_off"
    NOTES_MODEL_TROUBLE = "notes_model_trouble"
    NOTES_SETUP_PROBLEM = "notes_setup_problem"
    NOTES_NONE_YET = "notes_none_yet"
    NOTES_NOT_FOUND = "notes_not_found"
    NOTES_ASK_TOPIC = "notes_ask_topic"
    HANDED_BACK = "handed_back"
    LOGIN_TITLE = "login_title"
    LOGIN_HEADING = "login_heading"
    LOGIN_ASKING = "login_asking"
    LOGIN_WAIT = "login_wait"
    LOGIN_SCANNED = "login_scanned"
    LOGIN_CONFIRMED = "login_confirmed"
    LOGIN_EXPIRED = "login_expired"
    LOGIN_RELOAD = "login_reload"
    LOGIN_FORBIDDEN = "login_forbidden"
    LOGIN_NOT_WAITING = "login_not_waiting"
    STREAM_CONTINUES = "stream_continues"
    THINKING = "thinking"


def placeholders(text: str) -> frozenset[str]:
    """The ``str.format`` fields a phrase expects."""
    return frozenset(field for _, field, _, _ in string.Formatter().parse(text) if field)


@cache
def catalogue() -> dict[Phrase, dict[str, str]]:
    """The whole table, checked: every phrase, every language, English's placeholders in each."""
    raw = tomllib.loads(CATALOGUE.read_text(encoding="utf-8"))
    unknown = set(raw) - {p.value for p in Phrase}
    if unknown:
        raise ConfigError(f"{CATALOGUE.name}: phrases no code uses: {', '.join(sorted(unknown))}")
    table: dict[Phrase, dict[str, str]] = {}
    for phrase in Phrase:
        texts = raw.get(phrase.value)
        if not isinstance(texts, dict) or set(texts) != set(LANGUAGES):
            raise ConfigError(f"{CATALOGUE.name}: [{phrase.value}] needs exactly {', '.join(LANGUAGES)}")
        expected = placeholders(texts[ENGLISH])
        for language, text in texts.items():
            if not isinstance(text, str) or not text.strip() or placeholders(text) != expected:
                raise ConfigError(f"{CATALOGUE.name}: [{phrase.value}] {language} must keep the fields "
                                  f"{sorted(expected)} of the English")
        table[phrase] = dict(texts)
    return table


def catalogued(tag: str) -> str | None:
    """The catalogue's language for a BCP-47 tag (``zh-CN`` -> ``zh-Hans``, ``en-GB`` -> ``en``), or None."""
    tag = tag.strip().replace("_", "-").casefold()
    if not tag:
        return None
    if tag in _SIMPLIFIED:
        return CHINESE
    primary = tag.split("-", 1)[0]
    if primary == "zh":
        return None  # Traditional Chinese, or a region we cannot place: no text for it
    return next((language for language in LANGUAGES if language.casefold() == primary), None)


def language_for(partner_languages: tuple[str, ...], locale: str = "") -> str:
    """The language to speak to a learner: their locale if the partner speaks it, else the partner's."""
    spoken = [language for language in map(catalogued, partner_languages) if language]
    learner = catalogued(locale)
    if learner and learner in spoken:
        return learner
    return spoken[0] if spoken else ENGLISH


def template(phrase: Phrase, language: str = ENGLISH) -> str:
    """``phrase`` in ``language`` (English if the catalogue lacks it), its fields still unfilled."""
    texts = catalogue()[phrase]
    return texts.get(language, texts[ENGLISH])


def say(phrase: Phrase, language: str, **fields: object) -> str:
    """``phrase`` in ``language``, its fields filled."""
    return template(phrase, language).format(**fields)


catalogue()  # a broken catalogue fails at import, where the operator sees it, not in a learner's turn
