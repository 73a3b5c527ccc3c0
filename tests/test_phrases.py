"""The phrase catalogue: complete in every language, the same fields in each, and one choice of language."""

from __future__ import annotations

import tomllib

import pytest

from gateway.core import phrases
from gateway.core.errors import ConfigError
from gateway.core.phrases import CHINESE, ENGLISH, LANGUAGES, Phrase, language_for, placeholders, say


def test_every_phrase_has_every_language_with_the_english_placeholders():
    raw = tomllib.loads(phrases.CATALOGUE.read_text(encoding="utf-8"))
    assert set(raw) == {p.value for p in Phrase}
    for phrase in Phrase:
        texts = raw[phrase.value]
        assert set(texts) == set(LANGUAGES), phrase
        for language in LANGUAGES:
            assert texts[language].strip(), (phrase, language)
            assert placeholders(texts[language]) == placeholders(texts[ENGLISH]), (phrase, language)


def test_commands_stay_verbatim_in_every_language():
    for phrase in Phrase:
        english = say(phrase, ENGLISH, **dict.fromkeys(placeholders(phrases.template(phrase)), "X"))
        chinese = say(phrase, CHINESE, **dict.fromkeys(placeholders(phrases.template(phrase)), "X"))
        for command in ("/link", "/forget confirm", "/forget"):
            assert (command in english) == (command in chinese), (phrase, command)


def test_the_chinese_is_chinese():
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in phrases.template(p, CHINESE)) for p in Phrase)


@pytest.mark.parametrize(("partner", "locale", "expected"), [
    (("en", "zh-Hans"), "zh-CN", CHINESE),
    (("en", "zh-Hans"), "zh", CHINESE),
    (("en", "zh-Hans"), "zh_SG", CHINESE),
    (("en", "zh-Hans"), "zh-Hans", CHINESE),
    (("en", "zh-Hans"), "de", ENGLISH),
    (("en", "zh-Hans"), "en-GB", ENGLISH),
    (("en", "zh-Hans"), "", ENGLISH),
    (("zh-Hans", "en"), "", CHINESE),
    (("zh-Hans", "en"), "zh-TW", CHINESE),  # Traditional: no text for it, so the partner's first language
    (("en", "zh-Hans"), "zh-TW", ENGLISH),
    (("en", "zh-Hans"), "zh-Hant", ENGLISH),
    (("zh-Hans",), "en", CHINESE),  # the partner does not speak the learner's language: it stays itself
    (("zh-CN",), "", CHINESE),
    (("es", "fr"), "es", ENGLISH),  # languages the catalogue lacks fall back to English
    (("es", "zh-Hans"), "es", CHINESE),
    ((), "zh-CN", ENGLISH),
])
def test_language_for(partner, locale, expected):
    assert language_for(partner, locale) == expected


@pytest.mark.parametrize("broken", [
    '[stopped]\nen = "Stopped."\n',  # every other phrase is missing, and stopped has no Chinese
    None,  # a translation that drops a placeholder
])
def test_a_broken_catalogue_is_refused_at_load(tmp_path, monkeypatch, broken):
    text = phrases.CATALOGUE.read_text(encoding="utf-8")
    if broken is None:
        broken = text.replace("你的验证码是 {code}", "你的验证码是 {kode}")
        assert broken != text
    path = tmp_path / "phrases.toml"
    path.write_text(broken, encoding="utf-8")
    monkeypatch.setattr(phrases, "CATALOGUE", path)
    phrases.catalogue.cache_clear()
    try:
        with pytest.raises(ConfigError):
            phrases.catalogue()
    finally:
        monkeypatch.undo()
        phrases.catalogue.cache_clear()
        phrases.catalogue()
