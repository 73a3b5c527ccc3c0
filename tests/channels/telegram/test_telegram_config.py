"""The account's settings are checked before anything connects, and Bot API failures map onto the error tree."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError
from telegram.error import NetworkError, RetryAfter, TimedOut

from channels.telegram.config import TelegramConfig
from channels.telegram.transport import BotApiError, translate
from gateway.core.errors import AuthFailed, BadRequest, Forbidden, NotFound, PeerUnavailable, RateLimited, Unsupported


@pytest.fixture(autouse=True)
def _secrets(monkeypatch):
    monkeypatch.setenv("TG_TOKEN", "123:abc")
    monkeypatch.setenv("TG_HOOK", "good_secret-1")
    monkeypatch.setenv("TG_BAD_HOOK", "has spaces!")


def test_polling_is_the_default_and_the_endpoint_is_configurable():
    config = TelegramConfig.model_validate({"token": "env:TG_TOKEN", "api_url": "http://127.0.0.1:8081/"})
    assert config.mode == "poll"
    assert config.bot_url == "http://127.0.0.1:8081/bot"
    assert config.download_url == "http://127.0.0.1:8081/file/bot"
    assert config.token.get_secret_value() == "123:abc" and "abc" not in repr(config)


@pytest.mark.parametrize("settings, complaint", [
    ({"mode": "webhook", "webhook_secret": "env:TG_HOOK"}, "needs webhook_url"),
    ({"mode": "webhook", "webhook_url": "https://x/webhooks/telegram/main"}, "needs webhook_secret"),
    ({"webhook_secret": "env:TG_BAD_HOOK"}, "A-Z a-z 0-9 _ -"),
    ({"commands": {"Help!": "x"}}, "command 'Help!'"),
    ({"token": "123:abc"}, "env:VARIABLE_NAME"),
])
def test_bad_settings_are_refused_with_the_fix(settings, complaint):
    with pytest.raises(ValidationError, match=complaint.replace("*", r"\*")):
        TelegramConfig.model_validate({"token": "env:TG_TOKEN", **settings})


@pytest.mark.parametrize("error, expected, code", [
    (RetryAfter(3), RateLimited, 429),
    (RetryAfter(timedelta(seconds=2)), RateLimited, 429),
    (BotApiError(401, "Unauthorized"), AuthFailed, 401),
    (BotApiError(404, "Not Found"), AuthFailed, 404),
    (BotApiError(404, "Not Found: method not found"), Unsupported, 404),
    (BotApiError(403, "Forbidden: bot was blocked by the user"), Forbidden, 403),  # a NotFound, as it always was
    (BotApiError(400, "Bad Request: chat not found"), NotFound, 400),
    (BotApiError(400, "Bad Request: message is too long"), BadRequest, 400),
    (BotApiError(409, "Conflict: terminated by other getUpdates request"), PeerUnavailable, 409),
    (BotApiError(502, "Bad Gateway"), PeerUnavailable, 502),
    (TimedOut(), PeerUnavailable, None),
    (NetworkError("connection reset"), PeerUnavailable, None),
])
def test_bot_api_failures_are_translated_most_specific_first(error, expected, code):
    translated = translate(error, "sendMessage")
    assert type(translated) is expected
    assert isinstance(translated, NotFound) == (expected in (NotFound, Forbidden))
    assert translated.platform == "telegram" and translated.code == code
    if expected is RateLimited:
        assert translated.retry_after in (3, 2) and translated.scope == "chat"
        assert "telegram says 429" in str(translated)


def test_a_token_in_an_error_text_is_redacted():
    leaked = NetworkError("ConnectError: http://api.example/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/getMe failed")
    translated = translate(leaked, "getMe")
    assert "AAHdqTcv" not in str(translated) and "AAHdqTcv" not in translated.detail
    assert "bot<token>/getMe" in str(translated)
