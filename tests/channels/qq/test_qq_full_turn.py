"""A full turn on a QQ bot: a learner at the emulator, the real brain, the stub model, and back.

The gateway builds its own brain and reaches the OpenAI-compatible stub over
HTTP; the learner's C2C message is posted signed, as QQ posts it, and the
answer is read from what the emulated QQ showed the learner.
"""

from __future__ import annotations

import pytest

from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "什么是光合作用？"
ANSWER = "Plants use **light** to make sugar. What is the sugar for?"
SHOWN = "Plants use light to make sugar. What is the sugar for?"


async def test_a_qq_learners_question_is_answered_by_the_model_once(qq_rig, monkeypatch, tmp_path):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    async with ModelStub() as stub:
        stub.script(Reply.text(ANSWER, chunk=8, pause=0.01))

        def with_brain(raw: dict) -> dict:
            built = e2e_config(tmp_path / "brain", stub.api_base, channel="qq", account="school",
                               account_settings=raw["channels"]["qq"]["school"])
            return {**built, "data_dir": raw["data_dir"]}

        rig = await qq_rig(config=with_brain)
        assert rig.gateway.own_brain
        msg_id = await rig.peer.say("LEARNEROPENID0042", QUESTION)
        assert await rig.texts("LEARNEROPENID0042", 1) == [SHOWN]
        await rig.quiet()
        assert rig.peer.texts_to("LEARNEROPENID0042") == [SHOWN]
        assert [m["msg_id"] for m in rig.peer.sent] == [msg_id]
        [request] = stub.requests
        assert request["messages"][-1] == {"role": "user", "content": QUESTION}
