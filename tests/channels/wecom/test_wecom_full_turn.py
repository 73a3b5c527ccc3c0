"""A full turn on WeCom: a learner at the emulator, the real brain, the stub model, and back.

The gateway builds its own brain (persona, house rules, litellm) and reaches
the OpenAI-compatible stub over HTTP; the answer goes back through
wecom-aibot-sdk as a stream that finishes once, in WeCom's markdown.
"""

from __future__ import annotations

import os
import uuid

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.channels.wecom.conftest import account_settings
from tests.contract.harness import eventually, settled
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.extras import need_module
from tests.peers.model_stub import ModelStub, Reply
from tests.peers.wecom_server import WecomServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "What is photosynthesis?"
ANSWER = "Plants use **light** to turn water and carbon dioxide into sugar. What do you think the sugar is for?"


async def test_a_learner_in_a_dm_gets_the_models_answer_once_streamed(tmp_path, monkeypatch):
    need_module("wecom_aibot_sdk")
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    env = f"WECOM_SECRET_{uuid.uuid4().hex[:8].upper()}"
    async with WecomServer() as server, ModelStub() as stub:
        os.environ[env] = server.secret
        config = parse_config(e2e_config(tmp_path / "data", stub.api_base, channel="wecom", account="school",
                                         account_settings=account_settings(server, env)))
        gateway = Gateway(config)
        await gateway.start()
        try:
            assert gateway.channel("wecom", "school") is not None, gateway.unavailable
            stub.script(Reply.text(ANSWER, chunk=8, pause=0.1))
            said = await server.say(QUESTION)

            def done():
                shown = server.answers("learner1")
                return shown if shown and settled(gateway) else None

            [answer] = await eventually(done, what="the answer in the learner's WeCom")
            assert answer.content == ANSWER  # WeCom's markdown keeps **bold** as it is
            assert answer.req_id == said.req_id and answer.finished == 1 and answer.after_finish == 0
            [request] = stub.requests
            assert request["stream"] is True
            assert request["messages"][-1] == {"role": "user", "content": QUESTION}
        finally:
            await gateway.stop()
            os.environ.pop(env, None)


APP_QUESTION = "什么是光合作用？"
APP_SHOWN = "Plants use light to turn water and carbon dioxide into sugar. What do you think the sugar is for?"


async def test_a_self_built_apps_member_gets_the_models_answer_once_as_plain_text(app_rig, tmp_path, monkeypatch):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    async with ModelStub() as stub:
        stub.script(Reply.text(ANSWER, chunk=8, pause=0.01))

        def with_brain(raw: dict) -> dict:
            built = e2e_config(tmp_path / "brain", stub.api_base, channel="wecom", account="school",
                               account_settings=raw["channels"]["wecom"]["school"])
            return {**built, "data_dir": raw["data_dir"]}

        rig = await app_rig(config=with_brain)
        assert rig.gateway.own_brain
        await rig.peer.say("zhangsan", APP_QUESTION)
        assert await rig.texts("zhangsan", 1) == [APP_SHOWN]  # the app's text is plain: no markdown marks
        await rig.quiet()
        assert rig.peer.texts_to("zhangsan") == [APP_SHOWN]
        [request] = stub.requests
        assert request["messages"][-1] == {"role": "user", "content": APP_QUESTION}
