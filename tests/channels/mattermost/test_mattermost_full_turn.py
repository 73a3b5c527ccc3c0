"""A full turn on a Mattermost bot: a learner's direct message at the emulator, the real brain, the stub model, and back.

The gateway builds its own brain and reaches the OpenAI-compatible stub over
HTTP; the learner's post is pushed on the websocket as Mattermost pushes it
(``posted``, the post as a JSON string), and the answer is read from the
bot's post in the channel after its patches.
"""

from __future__ import annotations

import uuid

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.channels.mattermost.conftest import account_settings
from tests.contract.harness import eventually, settled
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.mattermost_server import MattermostServer
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "什么是光合作用？"
ANSWER = "Plants use **light** to make sugar. What is the sugar for?"
DM = "d" + "7" * 25


async def test_a_mattermost_learners_question_is_answered_by_the_model_once(monkeypatch, tmp_path):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    env = f"MATTERMOST_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    async with ModelStub() as stub, MattermostServer() as server:
        stub.script(Reply.text(ANSWER, chunk=8, pause=0.01))
        monkeypatch.setenv(env, server.token)
        raw = e2e_config(tmp_path / "data", stub.api_base, channel="mattermost", account="school",
                         account_settings=account_settings(server, env))
        gateway = Gateway(parse_config(raw))
        await gateway.start()
        try:
            assert gateway.own_brain
            await server.connected()
            await server.say(QUESTION, channel=DM, user="learner1")

            def answered() -> bool:
                return bool(server.shown(DM)) and settled(gateway)

            await eventually(answered, what="the model's answer in the direct message")
        finally:
            await gateway.stop()
        [sent] = server.shown(DM)
        assert sent.message.strip() == ANSWER  # Mattermost shows Markdown: the bold stays as written
        assert sent.root_id == ""
        [request] = stub.requests
        assert request["messages"][-1] == {"role": "user", "content": QUESTION}
