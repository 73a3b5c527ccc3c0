"""The Discord channel's pure pieces: settings checks, error translation, command text, nonces, referrer tokens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import SecretStr

from channels.discord.channel import DiscordChannel
from channels.discord.config import DiscordConfig
from channels.discord.decode import INTERACTION, command_text, interaction_token
from channels.discord.encode import nonce_for
from channels.discord.probe import check_settings
from channels.discord.transport import Refused, redact, translate
from gateway.core.errors import PeerUnavailable, RateLimited
from gateway.core.messages import Referrer
from tests.contract.discord_harness import new_token


def settings(**values) -> DiscordConfig:
    return DiscordConfig(token=SecretStr(values.pop("token", new_token())), **values)


def test_a_well_shaped_token_and_the_default_endpoints_show_no_problem():
    assert check_settings(settings()) == []


@pytest.mark.parametrize("values, words", [
    ({"token": ""}, "empty"),
    ({"token": "123456789012345678"}, "does not look like a bot token"),
    ({"api_base": "discord.com/api"}, "api_base"),
    ({"gateway_url": "https://gateway.discord.gg"}, "gateway_url"),
    ({"api_base": "https://example.com/api/v10"}, "example host"),
])
def test_settings_that_cannot_work_are_named_with_their_fix(values, words):
    [problem] = check_settings(settings(**values))
    assert words in problem.message and problem.fix


def test_a_429_becomes_one_rate_limited_with_its_scope():
    error = translate(Refused(429, 2.5, is_global=True, message="You are being rate limited."), "send")
    assert isinstance(error, RateLimited) and error.retry_after == 2.5 and error.scope == "global"
    local = translate(Refused(429, 0.4, is_global=False, message="slow"), "send")
    assert isinstance(local, RateLimited) and local.scope == "chat"
    assert isinstance(translate(Refused(502, 1, is_global=False, message="Bad Gateway"), "send"), PeerUnavailable)


def test_a_token_never_survives_in_an_error_text():
    token = new_token()
    assert token not in redact(f"request with {token} failed")


def test_slash_commands_read_as_the_text_the_gateway_understands():
    assert command_text("ask", {"question": "what is 2 + 2?"}) == "what is 2 + 2?"
    assert command_text("stop", {}) == "/stop"
    assert command_text("link", {"code": "ABCD1234"}) == "/link ABCD1234"


def test_an_interaction_token_answers_until_it_expires():
    lifetime = DiscordChannel.capabilities().reply_token_lifetime_s
    assert lifetime == 15 * 60  # platforms.toml, from Discord's docs (D4)
    now = datetime.now(UTC)
    referrer = Referrer(token=f"{INTERACTION}{int((now + timedelta(seconds=lifetime)).timestamp())}:tok")
    assert interaction_token(referrer, now) == "tok"
    assert interaction_token(referrer, now + timedelta(minutes=16)) is None
    assert interaction_token(Referrer(token="someone"), now) is None


def test_a_nonce_is_stable_and_fits_discords_25_characters():
    assert nonce_for("key:1") == nonce_for("key:1") != nonce_for("key:2")
    assert len(nonce_for("k" * 500)) <= 25
