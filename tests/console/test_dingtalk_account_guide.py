"""The DingTalk guided form over real HTTP against the DingTalk emulator: a refused secret comes back with
the probe's reason (an access-token call) and stores nothing; the right one is stored, opens the stream and runs."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

from tests.console.rig import serve_console, signed_in
from tests.console.test_channel_account_guides import refused_then_added
from tests.console.test_channel_accounts import key, stored_bytes
from tests.extras import need_module

__all__ = ["key"]  # the fixture, used by name


async def test_a_dingtalk_app_is_checked_with_an_access_token_and_runs(tmp_path: Path, key):
    need_module("dingtalk_stream")
    from tests.peers.dingtalk_server import DingtalkServer

    async with DingtalkServer(client_id="dingquartz", secret="Vq7Rm2Xk9Lp4Tz8w") as server, \
            serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ada")) as ada:
        form = (await ada.get("/console/channel-accounts/new/dingtalk")).text
        assert 'type="password" name="client_secret"' in form and "Stream" in form
        base = {"client_id": server.client_id, "api_base": server.url}
        reason, _ = await refused_then_added(running, ada, "dingtalk", "dingtalk",
                                             {**base, "client_secret": "Nq3Wz8Rt1Yb6Kd0p"},
                                             {**base, "client_secret": server.secret})
        assert "credentials" in reason and "Nq3Wz8Rt1Yb6Kd0p" not in reason, reason
        await server.connected()
    assert b"Vq7Rm2Xk9Lp4Tz8w" not in stored_bytes(tmp_path / "data")
