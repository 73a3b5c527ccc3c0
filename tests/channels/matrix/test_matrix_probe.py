"""The Matrix probe against a real Synapse: whoami with a token, a throwaway login with a password."""

from __future__ import annotations

import uuid

import httpx
import pytest

from gateway.configfile import parse_config
from gateway.core.probes import Gravity
from gateway.doctor import probe_account

pytestmark = pytest.mark.timeout(120)


def config_for(url: str, user_id: str, **login):
    return parse_config({
        "data_dir": "unused",
        "channels": {"matrix": {"main": {"homeserver": url, "user_id": user_id, **login}}},
    })


def devices(url: str, token: str) -> list[dict]:
    response = httpx.get(f"{url}/_matrix/client/v3/devices", headers={"Authorization": f"Bearer {token}"},
                         timeout=30, trust_env=False)
    response.raise_for_status()
    return response.json()["devices"]


async def test_a_password_is_checked_on_a_throwaway_device_that_is_gone_afterwards(synapse, monkeypatch):
    bot = synapse.register(f"probe-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("MATRIX_PROBE_PASSWORD", bot.password)
    before = {d["device_id"] for d in devices(synapse.url, bot.access_token)}

    result = await probe_account(config_for(synapse.url, bot.user_id, password="env:MATRIX_PROBE_PASSWORD",
                                            device_id=bot.device_id), "matrix", "main")

    assert result.problems == (), result
    assert {d["device_id"] for d in devices(synapse.url, bot.access_token)} == before  # the gateway's device lives on


async def test_a_wrong_password_is_refused_with_the_fix(synapse, monkeypatch):
    bot = synapse.register(f"probe-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("MATRIX_PROBE_PASSWORD", "not-the-password")

    result = await probe_account(config_for(synapse.url, bot.user_id, password="env:MATRIX_PROBE_PASSWORD",
                                            device_id=bot.device_id), "matrix", "main")

    [problem] = result.problems
    assert problem.message.startswith(f"the homeserver {synapse.url} refused the bot's credentials")
    assert "not-the-password" not in problem.message + problem.fix


async def test_a_token_of_another_user_or_device_is_named(synapse, monkeypatch):
    bot = synapse.register(f"probe-{uuid.uuid4().hex[:8]}")
    other = synapse.register(f"probe-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("MATRIX_PROBE_TOKEN", other.access_token)

    wrong_user = await probe_account(config_for(synapse.url, bot.user_id, access_token="env:MATRIX_PROBE_TOKEN",
                                                device_id=other.device_id), "matrix", "main")
    monkeypatch.setenv("MATRIX_PROBE_TOKEN", bot.access_token)
    wrong_device = await probe_account(config_for(synapse.url, bot.user_id, access_token="env:MATRIX_PROBE_TOKEN",
                                                  device_id="NOTTHISONE"), "matrix", "main")

    [problem] = wrong_user.problems
    assert problem.message == f"the access token belongs to {other.user_id}, not to user_id {bot.user_id}"
    [warning] = wrong_device.problems
    assert warning.gravity is Gravity.WARNING and wrong_device.ok
    assert warning.message == f"the access token is for device {bot.device_id}, not device_id NOTTHISONE"
