"""A full turn on a WeChat Official Account: a learner at the WeChat emulator, the real brain, the stub model, and back.

The gateway builds its own brain and reaches the OpenAI-compatible stub over
HTTP; WeChat's callback is posted encrypted (safe mode) and the answer read
from what the emulated WeChat showed the learner.
"""

from __future__ import annotations

import pytest

from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "什么是光合作用？"
ANSWER = "Plants use **light** to make sugar. What is the sugar for?"
SHOWN = "Plants use light to make sugar. What is the sugar for?"


async def test_a_learners_question_is_answered_by_the_model_once(open_rig, monkeypatch, tmp_path):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    async with ModelStub() as stub:
        stub.script(Reply.text(ANSWER, chunk=8, pause=0.01))

        def with_brain(raw: dict) -> dict:
            built = e2e_config(tmp_path / "brain", stub.api_base, channel="weixin", account="school",
                               account_settings=raw["channels"]["weixin"]["school"])
            return {**built, "data_dir": raw["data_dir"]}

        rig = await open_rig(mode="safe", config=with_brain)
        assert rig.gateway.own_brain
        await rig.oa.say("o-learner", QUESTION)
        assert await rig.texts("o-learner", 1) == [SHOWN]
        await rig.quiet()
        assert rig.oa.texts_to("o-learner") == [SHOWN]  # in the callback's answer or as a customer-service message, once
        [request] = stub.requests
        assert request["messages"][-1] == {"role": "user", "content": QUESTION}
