"""A channel whose server does not answer: the status reason names the endpoint and the fix, in plain words.

Each channel runs through its real SDK, under the real supervisor, against a
loopback port nothing listens on.  What ``/status`` and ``partners status``
show must be "cannot reach http://127.0.0.1:PORT (connection refused): check
...", never the SDK's own "httpx.ConnectError: All connection attempts
failed" or aiohttp's "Cannot connect to host ... ssl:default [...]".
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import ContractResponder, eventually

pytestmark = pytest.mark.timeout(120)

RAW = ("ConnectError", "All connection attempts", "Cannot connect to host", "Connect call failed", "Errno", "ssl:default")


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def account(channel: str, port: int) -> dict[str, Any]:
    if channel == "telegram":
        return {"token": "env:PARTNERS_TEST_SECRET", "api_url": f"http://127.0.0.1:{port}"}
    if channel == "matrix":
        return {"homeserver": f"http://127.0.0.1:{port}", "user_id": "@tutor:school.test",
                "access_token": "env:PARTNERS_TEST_SECRET", "device_id": "PARTNERS"}
    return {"address": "tutor@school.test", "password": "env:PARTNERS_TEST_SECRET",
            "imap_host": "127.0.0.1", "imap_port": port, "imap_security": "none",
            "smtp_host": "127.0.0.1", "smtp_port": port, "smtp_security": "none"}


EXPECTED = {
    "telegram": "telegram: getMe: cannot reach http://127.0.0.1:{port} (connection refused): check the network or api_url",
    "matrix": "matrix: cannot reach http://127.0.0.1:{port} (connection refused): check the network and homeserver",
    "email": "email: IMAP connect: cannot reach 127.0.0.1:{port} (connection refused): "
             "check the network, imap_host, imap_port and imap_security",
}


@pytest.mark.parametrize("channel", sorted(EXPECTED))
async def test_the_status_reason_names_the_endpoint_and_the_fix(channel, tmp_path, monkeypatch):
    monkeypatch.setenv("PARTNERS_TEST_SECRET", "123456:a-secret-that-must-not-show")
    port = closed_port()
    config = parse_config({
        "data_dir": str(tmp_path / "data"),
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "channels": {channel: {"main": account(channel, port)}},
        "bindings": [{"partner": "tutor", "channel": channel, "account": "main"}],
    })
    gateway = Gateway(config, responder=ContractResponder())
    await gateway.start()
    try:
        async def failed():
            [status] = (await gateway.status()).accounts
            return status if status.state == "error" and status.reason else None

        status = await eventually(failed, timeout=60, what=f"the {channel} account to report the closed port")
    finally:
        await gateway.stop()
    assert status.reason == EXPECTED[channel].format(port=port)
    assert not any(raw in status.reason for raw in RAW), status.reason
    assert "a-secret-that-must-not-show" not in status.reason
