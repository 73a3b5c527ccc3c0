"""Reverse websocket: the emulator plays NapCat's websocket client and dials the gateway's real HTTP server.

The gateway serves ``/channels/napcat/qq/ws`` from the channel's ``http_routes``;
a handshake without the right bearer or without ``X-Self-ID`` is refused 401
(403 for another QQ account than ``self_id``), and an accepted one carries
events in and actions out, answered with echo like the forward mode.
"""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from websockets.exceptions import InvalidStatus

from gateway.app import Gateway
from gateway.http.app import build_app
from gateway.http.server import serve_http
from tests.channels.napcat.conftest import account_settings, config
from tests.contract.harness import ContractResponder, eventually, settled
from tests.peers.napcat_server import NapcatServer


@pytest.fixture
async def reverse(tmp_path, token_env):
    async with NapcatServer(token=uuid.uuid4().hex) as napcat:
        os.environ[token_env] = napcat.token
        settings = account_settings(napcat, token_env, mode="reverse")
        gateway = Gateway(config(tmp_path / "data", settings, http={"host": "127.0.0.1", "port": 0}),
                          responder=ContractResponder())
        await gateway.start()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        http = asyncio.create_task(serve_http(build_app(gateway), "127.0.0.1", 0, on_ready=ready.set_result,
                                              websockets=gateway.serves_websockets()))
        try:
            base = (await asyncio.wait_for(ready, 10)).replace("http://", "ws://")
            yield napcat, gateway, f"{base}/channels/napcat/qq/ws"
        finally:
            await napcat.__aexit__(None, None, None)
            http.cancel()
            with pytest.raises(asyncio.CancelledError):
                await http
            await gateway.stop()


async def test_napcat_dialling_in_is_answered_with_echoed_actions(reverse):
    napcat, gateway, url = reverse
    await napcat.dial(url)
    await napcat.connected()
    said = await napcat.say("hello from reverse", user=30001)

    def answered():
        shown = napcat.shown("30001")
        return shown if shown and settled(gateway) else None

    [shown] = await eventually(answered, what="the answer over the reverse socket")
    assert shown.text == "echo: hello from reverse" and shown.reply_to == str(said.message_id)
    [action] = [a for a in napcat.actions if a["action"] == "send_private_msg"]
    assert action["echo"]


@pytest.mark.parametrize("token, self_id, status", [("wrong", None, 401), ("", None, 401), (None, 4242424242, 403)])
async def test_a_handshake_with_a_wrong_token_or_account_is_refused(reverse, token, self_id, status):
    napcat, gateway, url = reverse
    with pytest.raises(InvalidStatus) as refused:
        await napcat.dial(url, token=token if token is None else token + uuid.uuid4().hex[:6] * bool(token),
                          self_id=self_id)
    assert refused.value.response.status_code == status
    await napcat.dial(url)  # the right one still gets in
    await napcat.connected()
