"""A full turn on Slack: a learner at the Slack emulator, the real brain, the stub model, and back.

Nothing in between is faked: the gateway builds its own brain (persona, house
rules, session log, litellm), reaches the OpenAI-compatible stub over HTTP,
and answers through slack-bolt and slack_sdk against the emulator in Socket
Mode.  The checks read what the learner's Slack shows and what the model was asked.
"""

from __future__ import annotations

import os

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import eventually, settled
from tests.contract.slack_harness import SlackHarness
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "What is photosynthesis?"
ANSWER = "Plants use **light** to turn water and carbon dioxide into sugar. What do you think the sugar is for?"
SHOWN = "Plants use *light* to turn water and carbon dioxide into sugar. What do you think the sugar is for?"


@pytest.fixture
async def turn(slack_api, tmp_path, monkeypatch):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    harness = SlackHarness(slack_api)
    await harness.start(tmp_path)
    async with ModelStub() as stub:
        settings = {"bot_token": f"env:{harness.env['bot']}", "app_token": f"env:{harness.env['app']}",
                    "api_base": f"{slack_api}/api/", "access": {"dm": "open", "group": "mention"}}
        config = parse_config(e2e_config(tmp_path / "data", stub.api_base, channel="slack", account="school",
                                         account_settings=settings))
        gateway = Gateway(config)
        await gateway.start()
        try:
            assert gateway.channel("slack", "school") is not None, gateway.unavailable
            yield harness, stub, gateway
        finally:
            await gateway.stop()
            await harness.stop()
            os.environ.pop(harness.env["bot"], None)


async def answered(harness: SlackHarness, gateway: Gateway, chat: str) -> list[dict]:
    async def done():
        shown = (await harness.users.seen()).get(chat, [])
        return shown if shown and shown[-1]["text"] == SHOWN and settled(gateway) else None

    return await eventually(done, what="the answer in the learner's Slack")


async def test_a_learner_in_a_dm_gets_the_models_answer_in_mrkdwn(turn):
    harness, stub, gateway = turn
    stub.script(Reply.text(ANSWER, chunk=4, pause=0.05))
    said = await harness.say(QUESTION)
    [message] = await answered(harness, gateway, said.chat)
    assert message["thread_ts"] is None  # a DM is answered in the DM, not in a thread
    [request] = stub.requests
    assert request["stream"] is True
    assert request["messages"][-1] == {"role": "user", "content": QUESTION}


async def test_a_channel_mention_is_answered_by_the_model_in_a_thread_streamed_natively(turn):
    harness, stub, gateway = turn
    stub.script(Reply.text(ANSWER, chunk=4, pause=0.2))
    said = await harness.say(QUESTION, group=True, mention=True)
    [message] = await answered(harness, gateway, said.chat)
    asked = (await harness.users.app())["calls"]
    assert message["thread_ts"] is not None and not message["streaming"]
    assert any(c["method"] == "chat.startStream" for c in asked)
    [request] = stub.requests
    assert QUESTION in request["messages"][-1]["content"]
