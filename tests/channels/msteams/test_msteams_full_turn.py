"""A full turn on a Teams bot: a learner at the emulator, the real brain, the stub model, and back.

The gateway builds its own brain and reaches the OpenAI-compatible stub over
HTTP; the learner's 1:1 message is posted with a signed Bot Framework token,
and the answer -- streamed in the chat's one bubble -- is read from what the
emulated Teams shows the learner.
"""

from __future__ import annotations

import pytest

from tests.contract.harness import eventually
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "什么是光合作用？"
ANSWER = "Plants use **light** to make sugar. What is the sugar for?"


async def test_a_teams_learners_question_is_answered_by_the_model_once(teams_rig, monkeypatch, tmp_path):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    async with ModelStub() as stub:
        stub.script(Reply.text(ANSWER, chunk=8, pause=0.01))

        def with_brain(raw: dict) -> dict:
            built = e2e_config(tmp_path / "brain", stub.api_base, channel="msteams", account="school",
                               account_settings=raw["channels"]["msteams"]["school"])
            return {**built, "data_dir": raw["data_dir"]}

        rig = await teams_rig(config=with_brain)
        assert rig.gateway.own_brain
        await rig.peer.deliver(rig.peer.activity("a:1amy", "amy", QUESTION))
        await eventually(lambda: [s for s in rig.peer.seen_in("a:1amy") if s.text == ANSWER],
                         what="the model's answer in the chat")
        await rig.quiet()
        assert [s.text for s in rig.peer.seen_in("a:1amy")] == [ANSWER]  # Teams' Markdown, as the model wrote it
        [request] = stub.requests
        assert request["messages"][-1] == {"role": "user", "content": QUESTION}
