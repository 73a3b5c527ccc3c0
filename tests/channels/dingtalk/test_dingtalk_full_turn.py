"""A full turn on DingTalk: a learner at the emulator, the real brain, the stub model, and back.

The gateway builds its own brain (persona, house rules, litellm) and reaches the
OpenAI-compatible stub over HTTP; the answer goes back as DingTalk Markdown through
the learner's session webhook, once.
"""

from __future__ import annotations

import os
import uuid

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.channels.dingtalk.conftest import account_settings
from tests.contract.harness import eventually, settled
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.extras import need_module
from tests.peers.dingtalk_server import DingtalkServer
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "什么是光合作用？"
ANSWER = "Plants use **light** to turn water and carbon dioxide into sugar. What do you think the sugar is for?"


async def test_a_learner_in_a_direct_chat_gets_the_models_answer_once(tmp_path, monkeypatch):
    need_module("dingtalk_stream")
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    env = f"DINGTALK_SECRET_{uuid.uuid4().hex[:8].upper()}"
    async with DingtalkServer(secret=uuid.uuid4().hex) as server, ModelStub() as stub:
        os.environ[env] = server.secret
        config = parse_config(e2e_config(tmp_path / "data", stub.api_base, channel="dingtalk", account="school",
                                         account_settings=account_settings(server, env)))
        gateway = Gateway(config)
        await gateway.start()
        try:
            assert gateway.channel("dingtalk", "school") is not None, gateway.unavailable
            await server.connected()
            stub.script(Reply.text(ANSWER, chunk=8, pause=0.05))
            await server.say(QUESTION)

            def done():
                shown = server.answers("learner1")
                return shown if shown and settled(gateway) else None

            [answer] = await eventually(done, what="the answer in the learner's DingTalk")
            assert (answer.via, answer.text) == ("webhook", ANSWER)  # DingTalk's Markdown keeps **bold**
            [request] = stub.requests
            assert request["messages"][-1] == {"role": "user", "content": QUESTION}
        finally:
            await gateway.stop()
            os.environ.pop(env, None)
