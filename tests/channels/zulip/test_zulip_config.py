"""A Zulip account's credentials: a zuliprc file as Zulip hands it out, or the three values by hand."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from channels.zulip.channel import ZulipChannel
from channels.zulip.config import ZulipConfig


def test_a_zuliprc_fills_site_email_and_key(tmp_path):
    rc = tmp_path / "zuliprc"
    rc.write_text("[api]\nemail=tutor-bot@school.zulipchat.com\nkey=abc123XYZ\nsite=https://school.zulipchat.com/\n")
    settings = ZulipConfig(zuliprc=rc)
    assert settings.site == "https://school.zulipchat.com"
    assert settings.email == "tutor-bot@school.zulipchat.com" and settings.key == "abc123XYZ"
    assert "abc123XYZ" not in repr(settings)
    from gateway.redaction import redact

    assert "abc123XYZ" not in redact("basic auth failed with key abc123XYZ")  # read from a file, still scrubbed
    assert ZulipChannel.check(settings) == []


def test_values_given_by_hand_win_over_the_zuliprc(tmp_path, monkeypatch):
    rc = tmp_path / "zuliprc"
    rc.write_text("[api]\nemail=old@school.zulipchat.com\nkey=zk-rc-old-Tn41Bx\nsite=https://old.zulipchat.com\n")
    monkeypatch.setenv("ZULIP_NEW_KEY", "zk-hand-Vq83LmP2")
    settings = ZulipConfig(zuliprc=rc, site="https://school.zulipchat.com", api_key="env:ZULIP_NEW_KEY")
    assert settings.site == "https://school.zulipchat.com" and settings.key == "zk-hand-Vq83LmP2"
    assert settings.email == "old@school.zulipchat.com"


@pytest.mark.parametrize("text", ["", "[other]\nkey=x\n", "not an ini file at all ["])
def test_a_zuliprc_without_an_api_section_is_refused_in_words(tmp_path, text):
    rc = tmp_path / "zuliprc"
    rc.write_text(text)
    with pytest.raises(ValidationError) as caught:
        ZulipConfig(zuliprc=rc)
    assert "zuliprc" in str(caught.value)


def test_missing_credentials_name_what_is_missing():
    with pytest.raises(ValidationError) as caught:
        ZulipConfig(site="https://school.zulipchat.com")
    assert "missing email, api_key" in str(caught.value)


def test_check_finds_a_site_that_is_no_address_and_an_email_that_is_none(monkeypatch):
    monkeypatch.setenv("ZULIP_EMPTY", " ")
    problems = ZulipChannel.check(ZulipConfig(site="school.zulipchat.com", email="tutor-bot", api_key="env:ZULIP_EMPTY"))
    assert len(problems) == 3 and all(p.fix for p in problems)
