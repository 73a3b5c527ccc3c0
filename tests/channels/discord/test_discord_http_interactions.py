"""The optional Interactions Endpoint URL: the emulator POSTs signed interactions to the gateway's real HTTP app.

The emulator plays Discord with its own Ed25519 key pair (the account's
``public_key`` is its public half); the gateway runs its real brain against the
stub model and answers by follow-up through discord.py against the emulator's
webhook route.  A forged or stale request is refused 401 and stores nothing; a
command is answered type 5 only once it is durable, and then exactly once.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing

import httpx
import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.discord_harness import DiscordHarness
from tests.contract.harness import eventually, settled
from tests.e2e.rig import STUB_KEY_ENV, e2e_config, served
from tests.peers.discord_server import LOADING
from tests.peers.model_stub import ModelStub, Reply
from tests.waits import HTTP_S

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "Why is the sky blue?"
ANSWER = "Sunlight scatters off the air, and blue scatters most. What colour is a sunset, then?"


class Endpoint:
    def __init__(self, peer, stub, gateway, url: str) -> None:
        self.peer, self.stub, self.gateway, self.url = peer, stub, gateway, url

    def stored(self) -> int:
        with closing(sqlite3.connect(self.gateway.config.database_path)) as db:
            return db.execute("SELECT count(*) FROM inbound WHERE channel = 'discord'").fetchone()[0]

    def followups(self) -> int:
        return sum(1 for r in self.peer.requests if r["method"] == "POST" and r["route"] == "webhooks/{id}/{id}")

    async def answered(self, channel: str) -> list[dict]:
        def done():
            shown = self.peer.seen(channel)
            return shown if shown and shown[-1]["content"] == ANSWER and settled(self.gateway) else None

        return await eventually(done, what="the model's answer in the learner's channel")

    def channel_posts(self) -> int:
        return sum(1 for r in self.peer.requests if r["method"] == "POST" and r["route"] == "channels/{id}/messages")


async def test_a_command_whose_deferral_never_reached_discord_is_answered_by_one_channel_message(endpoint):
    endpoint.stub.script(Reply.text(ANSWER))
    ask = endpoint.peer.interaction("ask", {"question": QUESTION})
    assert await endpoint.peer.post_interaction(endpoint.url, ask, lost=True) == (200, {"type": 5})
    [message] = await endpoint.answered(ask["channel_id"])
    assert not message["flags"] & LOADING and "interaction_metadata" not in message  # a plain channel message
    assert endpoint.channel_posts() == 1 and endpoint.followups() == 1  # the follow-up was tried, refused 10015
    assert len(endpoint.stub.requests) == 1


async def test_an_answer_after_the_token_expired_goes_to_the_channel_once(endpoint):
    endpoint.stub.script(Reply.text(ANSWER, gated=True))
    ask = endpoint.peer.interaction("ask", {"question": QUESTION})
    assert await endpoint.peer.post_interaction(endpoint.url, ask) == (200, {"type": 5})
    endpoint.peer.expire_interaction(ask["token"])  # the model took longer than the token's 15 minutes
    endpoint.stub.open_gate()
    placeholder, message = await endpoint.answered(ask["channel_id"])
    assert placeholder["flags"] & LOADING and message["content"] == ANSWER
    assert endpoint.channel_posts() == 1 and endpoint.followups() == 1


@pytest.fixture
async def endpoint(tmp_path, monkeypatch):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)
    harness = DiscordHarness()
    await harness.start(tmp_path)
    try:
        async with ModelStub() as stub:
            settings = {k: v for k, v in harness.settings(public_key=harness.peer.public_key).items() if k != "access"}
            gateway = Gateway(parse_config(e2e_config(tmp_path / "data", stub.api_base, channel="discord",
                                                      account="main", account_settings=settings)))
            await gateway.start()
            try:
                assert gateway.channel("discord", "main") is not None, gateway.unavailable
                await harness.attach(gateway)
                async with served(gateway) as base:
                    yield Endpoint(harness.peer, stub, gateway, f"{base}/webhooks/discord/main")
            finally:
                await gateway.stop()
    finally:
        await harness.stop()


async def test_discords_ping_is_answered_pong_and_a_forged_one_401(endpoint):
    assert await endpoint.peer.ping(endpoint.url) == (200, {"type": 1})
    status, _ = await endpoint.peer.ping(endpoint.url, forged=True)
    assert status == 401
    assert endpoint.stored() == 0


async def test_a_forged_command_is_refused_401_and_nothing_is_stored(endpoint):
    ask = endpoint.peer.interaction("ask", {"question": QUESTION})
    status, _ = await endpoint.peer.post_interaction(endpoint.url, ask, forged=True)
    assert status == 401
    async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False) as http:
        unsigned = await http.post(endpoint.url, json=ask)
    assert unsigned.status_code == 401
    assert endpoint.stored() == 0 and endpoint.stub.requests == []


async def test_a_rightly_signed_but_stale_command_is_refused(endpoint):
    ask = endpoint.peer.interaction("ask", {"question": QUESTION})
    status, _ = await endpoint.peer.post_interaction(endpoint.url, ask, timestamp=int(time.time()) - 600)
    assert status == 401
    assert endpoint.stored() == 0


async def test_ask_is_deferred_once_durable_then_answered_by_exactly_one_followup(endpoint):
    endpoint.stub.script(Reply.text(ANSWER, chunk=8, pause=0.02))
    ask = endpoint.peer.interaction("ask", {"question": QUESTION})
    assert await endpoint.peer.post_interaction(endpoint.url, ask) == (200, {"type": 5})
    assert endpoint.stored() == 1  # the answer came after the write
    [message] = await endpoint.answered(ask["channel_id"])
    assert not message["flags"] & LOADING, "the 'thinking' placeholder was not filled by the follow-up"
    assert endpoint.followups() == 1
    [request] = endpoint.stub.requests
    assert QUESTION in request["messages"][-1]["content"]


async def test_the_same_interaction_delivered_twice_is_answered_once(endpoint):
    endpoint.stub.script(Reply.text(ANSWER))
    ask = endpoint.peer.interaction("ask", {"question": QUESTION})
    now = int(time.time())
    assert await endpoint.peer.post_interaction(endpoint.url, ask, timestamp=now - 1) == (200, {"type": 5})
    assert await endpoint.peer.post_interaction(endpoint.url, ask, timestamp=now) == (200, {"type": 5})
    replayed, _ = await endpoint.peer.post_interaction(endpoint.url, ask, timestamp=now)  # the very same bytes
    assert replayed == 401
    [message] = await endpoint.answered(ask["channel_id"])
    assert endpoint.followups() == 1 and len(endpoint.stub.requests) == 1 and endpoint.stored() == 1


async def test_a_body_that_is_not_an_interaction_or_not_a_command_is_400(endpoint):
    assert (await endpoint.peer.post_signed(endpoint.url, b"{not json"))[0] == 400
    button = endpoint.peer.interaction("ask", {"question": QUESTION}, kind=3)  # a component click: not ours
    assert (await endpoint.peer.post_interaction(endpoint.url, button))[0] == 400
    unknown = endpoint.peer.interaction("dance")
    status, answer = await endpoint.peer.post_interaction(endpoint.url, unknown)
    assert status == 400 and "dance" in json.dumps(answer)
    assert endpoint.stored() == 0


async def test_an_account_without_a_public_key_has_no_endpoint(open_rig):
    rig = await open_rig()
    async with served(rig.gateway) as base:
        status, _ = await rig.peer.ping(f"{base}/webhooks/discord/main")
    assert status == 404  # its interactions come on the Gateway


async def test_a_bad_public_key_keeps_the_account_from_starting_and_says_why(tmp_path):
    harness = DiscordHarness()
    await harness.start(tmp_path)
    try:
        gateway = Gateway(parse_config(harness.raw_config(tmp_path / "data", public_key="not-a-key")))
        await gateway.start()
        try:
            assert gateway.channel("discord", "main") is None
            why = str(gateway.unavailable)
            assert "public_key" in why and "64 hex digits" in why, why
        finally:
            await gateway.stop()
    finally:
        await harness.stop()
