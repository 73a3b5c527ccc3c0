"""WeCom settings: the AI bot by default, another kind refused in words, the secret never shown."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from channels.wecom.config import AiBotMode, WecomConfig
from tests.extras import need_module


def test_the_ai_bot_is_the_default_kind_and_its_secret_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("WECOM_TEST_SECRET", "hush-hush")
    config = WecomConfig.model_validate({"mode": {"bot_id": "aib1", "secret": "env:WECOM_TEST_SECRET"}})
    assert isinstance(config.mode, AiBotMode) and config.mode.kind == "ai_bot"
    assert config.ai_bot.secret.get_secret_value() == "hush-hush"
    assert "hush-hush" not in repr(config) and "hush-hush" not in str(config.model_dump())


def test_another_kind_is_a_clear_config_error():
    with pytest.raises(ValidationError) as raised:
        WecomConfig.model_validate({"mode": {"kind": "app_callback", "token": "t"}})
    assert "'app_callback' is not available" in str(raised.value) and "ai_bot" in str(raised.value)


def test_unknown_fields_are_refused(monkeypatch):
    monkeypatch.setenv("WECOM_TEST_SECRET", "s")
    with pytest.raises(ValidationError) as raised:
        WecomConfig.model_validate({"mode": {"bot_id": "aib1", "secret": "env:WECOM_TEST_SECRET", "bot_secret": "typo"}})
    assert "bot_secret" in str(raised.value)


def test_check_finds_a_url_that_is_no_websocket_and_an_empty_secret(monkeypatch):
    need_module("wecom_aibot_sdk")  # without it, check() names the missing extra first
    from channels.wecom.channel import WecomChannel

    monkeypatch.setenv("WECOM_EMPTY", " ")
    monkeypatch.setenv("WECOM_TEST_SECRET", "s")
    good = WecomConfig.model_validate({"mode": {"bot_id": "aib1", "secret": "env:WECOM_TEST_SECRET"}})
    assert WecomChannel.check(good) == []
    bad = WecomConfig.model_validate({"mode": {"bot_id": "aib1", "secret": "env:WECOM_EMPTY",
                                               "ws_url": "https://openws.work.weixin.qq.com"}})
    problems = WecomChannel.check(bad)
    assert len(problems) == 2 and all(p.fix for p in problems)


KEY = "a" * 43


def test_a_self_built_app_reads_its_secrets_from_the_environment_and_has_its_own_capabilities(monkeypatch):
    from channels.wecom.channel import WecomChannel

    for name, value in (("WECOM_APP_SECRET", "corp-hush"), ("WECOM_APP_TOKEN", "tok"), ("WECOM_APP_KEY", KEY)):
        monkeypatch.setenv(name, value)
    config = WecomConfig.model_validate({"mode": {
        "kind": "app", "corpid": "ww0123456789abcdef", "corpsecret": "env:WECOM_APP_SECRET", "agentid": 1000002,
        "token": "env:WECOM_APP_TOKEN", "encoding_aes_key": "env:WECOM_APP_KEY", "api_base": "http://127.0.0.1:1"}})
    assert config.kind == "app" and config.app.agentid == 1000002 and config.app.api_base == "http://127.0.0.1:1/"
    assert "corp-hush" not in repr(config) and "corp-hush" not in str(config.model_dump())
    caps = WecomChannel.capabilities_for(config)
    assert (caps.text_limit, caps.text_unit, caps.reply_window_s, tuple(caps.inbound_modes)) == (2048, "bytes", None,
                                                                                                 ("webhook",))
    assert WecomChannel.capabilities_for(WecomConfig.model_validate(
        {"mode": {"bot_id": "b", "secret": "env:WECOM_APP_SECRET"}})).edit_mode == "native_stream"
    assert WecomChannel.check(config) == []


def test_an_app_with_a_short_encoding_aes_key_is_refused(monkeypatch):
    monkeypatch.setenv("WECOM_APP_SECRET", "s")
    monkeypatch.setenv("WECOM_APP_KEY", "Wk3yTooShort")  # distinct: a registered secret must not occur in other output
    with pytest.raises(ValidationError) as raised:
        WecomConfig.model_validate({"mode": {
            "kind": "app", "corpid": "ww1", "corpsecret": "env:WECOM_APP_SECRET", "agentid": 1,
            "token": "env:WECOM_APP_SECRET", "encoding_aes_key": "env:WECOM_APP_KEY"}})
    assert "43 letters and digits" in str(raised.value)
