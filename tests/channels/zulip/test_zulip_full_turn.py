"""A full turn on Zulip: a learner in a stream's topic at the emulator, the real brain, the stub model, and back.

The gateway builds its own brain and reaches the OpenAI-compatible stub over
HTTP; the learner's message reaches the bot through its event queue as Zulip
hands it out, and the answer is read from what the emulated Zulip shows in that
topic -- edited in place while the model streamed, LaTeX as the model wrote it.
"""

from __future__ import annotations

import uuid

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.channels.zulip.conftest import account_settings
from tests.contract.harness import eventually, settled
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply
from tests.peers.zulip_server import ZulipServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "什么是勾股定理？"
ANSWER = "In a right triangle $$a^2 + b^2 = c^2$$, where **c** is the longest side. Which side is c here?"


async def test_a_zulip_learners_question_in_a_topic_is_answered_by_the_model_once_in_that_topic(monkeypatch, tmp_path):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    env = f"ZULIP_KEY_{uuid.uuid4().hex[:8].upper()}"
    async with ModelStub() as stub, ZulipServer(heartbeat_s=0.5) as server:
        stub.script(Reply.text(ANSWER, chunk=8, pause=0.01))
        monkeypatch.setenv(env, server.key)
        raw = e2e_config(tmp_path / "data", stub.api_base, channel="zulip", account="school",
                         account_settings=account_settings(server, env))
        gateway = Gateway(parse_config(raw))
        await gateway.start()
        try:
            assert gateway.own_brain
            await eventually(lambda: server.polls >= 1, what="the bot to poll its queue")
            said = await server.say(QUESTION, stream="geometry", topic="triangles", mention=True)

            def answered() -> bool:
                return bool(server.shown(said.chat)) and server.shown(said.chat)[-1].content.strip() == ANSWER \
                    and settled(gateway)

            await eventually(answered, what="the model's answer in the topic")
        finally:
            await gateway.stop()
        [sent] = server.shown(said.chat)
        assert sent.topic == "triangles"
        assert "$$a^2 + b^2 = c^2$$" in sent.content
        [request] = stub.requests
        # a group's turn names who spoke; the @-mention of the bot is not part of what the model reads
        assert request["messages"][-1] == {"role": "user", "content": f"Ada Learner: {QUESTION}"}
