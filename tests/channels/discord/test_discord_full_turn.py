"""A full turn on Discord: a learner at the Gateway emulator, the real brain, the stub model, and back.

Nothing in between is faked: the gateway builds its own brain (persona, house
rules, session log, litellm), reaches the OpenAI-compatible stub over HTTP,
and answers through discord.py against the emulator.  The checks read what the
learner's channel shows and what the model was asked.
"""

from __future__ import annotations

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.discord_harness import DiscordHarness
from tests.contract.harness import eventually, settled
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "What is photosynthesis?"
ANSWER = "Plants use **light** to turn water and carbon dioxide into sugar. What do you think the sugar is for?"


@pytest.fixture
async def turn(tmp_path, monkeypatch):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    harness = DiscordHarness()
    await harness.start(tmp_path)
    try:
        async with ModelStub() as stub:
            settings = {k: v for k, v in harness.settings().items() if k != "access"}
            config = parse_config(e2e_config(tmp_path / "data", stub.api_base, channel="discord", account="main",
                                             account_settings=settings))
            gateway = Gateway(config)
            await gateway.start()
            try:
                assert gateway.channel("discord", "main") is not None, gateway.unavailable
                await harness.attach(gateway)
                yield harness.peer, stub, gateway
            finally:
                await gateway.stop()
    finally:
        await harness.stop()


async def answered(peer, gateway, channel: str) -> list[dict]:
    def done():
        shown = peer.seen(channel)
        return shown if shown and shown[-1]["content"] == ANSWER and settled(gateway) else None

    return await eventually(done, what="the brain's answer in the learner's channel")


async def test_a_learner_in_a_dm_gets_the_brains_answer_streamed_into_one_message(turn):
    peer, stub, gateway = turn
    stub.script(Reply.text(ANSWER, chunk=4, pause=0.05))
    asked = await peer.say(QUESTION)
    [message] = await answered(peer, gateway, asked["channel_id"])
    assert message["message_reference"]["message_id"] == asked["id"]
    assert message["edits"] >= 1, "the answer was not streamed by editing one message"
    [request] = stub.requests
    assert request["stream"] is True
    assert request["messages"][-1] == {"role": "user", "content": QUESTION}


async def test_a_learner_in_a_thread_gets_the_answer_there_through_the_slash_command(turn):
    peer, stub, gateway = turn
    stub.script(Reply.text(ANSWER, chunk=8, pause=0.02))
    await eventually(lambda: peer.commands, what="the slash commands to be registered")
    thread = await peer.open_thread("Biology")
    await peer.command("ask", {"question": QUESTION}, channel=thread)
    [message] = await answered(peer, gateway, thread)
    assert not message["flags"] & 128  # the deferred "thinking" placeholder was filled by the follow-up
    [request] = stub.requests
    assert QUESTION in request["messages"][-1]["content"]
