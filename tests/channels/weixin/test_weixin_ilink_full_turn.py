"""A full turn on personal WeChat: a learner at the iLink emulator, the real brain, the stub model, and back.

The account is logged in by QR code against the emulator; the gateway builds
its own brain and reaches the OpenAI-compatible stub over HTTP; the answer is
read from what the emulated platform took from ``sendmessage``.
"""

from __future__ import annotations

import pytest

from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "什么是光合作用？"
ANSWER = "Plants use **light** to make sugar. What is the sugar for?"
SHOWN = "Plants use light to make sugar. What is the sugar for?"


async def test_a_learners_question_is_answered_by_the_model_once(ilink_rig, monkeypatch, tmp_path):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    async with ModelStub() as stub:
        stub.script(Reply.text(ANSWER, chunk=8, pause=0.01))

        def with_brain(raw: dict) -> dict:
            built = e2e_config(tmp_path / "brain", stub.api_base, channel="weixin", account="school",
                               account_settings=raw["channels"]["weixin"]["school"])
            return {**built, "data_dir": raw["data_dir"]}

        rig = await ilink_rig(config=with_brain)
        assert rig.gateway.own_brain
        await rig.peer.say("learner@im.wechat", QUESTION)
        assert await rig.texts("learner@im.wechat", 1) == [SHOWN]
        await rig.quiet()
        assert rig.peer.texts_to("learner@im.wechat") == [SHOWN]
        [request] = stub.requests
        assert request["messages"][-1] == {"role": "user", "content": QUESTION}
