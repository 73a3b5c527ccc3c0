"""A full turn on each kind of WeChat account: a learner at the emulator, the real brain, the stub model, and back.

The gateway builds its own brain and reaches the OpenAI-compatible stub over
HTTP.  On an Official Account WeChat's callback is posted encrypted (safe
mode); on personal WeChat the account is logged in by QR code first.  The
answer is read from what the emulated platform showed the learner.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "什么是光合作用？"
ANSWER = "Plants use **light** to make sugar. What is the sugar for?"
SHOWN = "Plants use light to make sugar. What is the sugar for?"


@dataclass
class Brain:
    stub: ModelStub
    config: Callable[[dict], dict]
    """Turns the rig's config into one whose gateway builds its real brain on the stub."""

    def asked_once(self) -> None:
        [request] = self.stub.requests
        assert request["messages"][-1] == {"role": "user", "content": QUESTION}


@pytest.fixture
async def brain(monkeypatch, tmp_path: Path) -> AsyncIterator[Brain]:
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    async with ModelStub() as stub:
        stub.script(Reply.text(ANSWER, chunk=8, pause=0.01))

        def with_brain(raw: dict) -> dict:
            built = e2e_config(tmp_path / "brain", stub.api_base, channel="weixin", account="school",
                               account_settings=raw["channels"]["weixin"]["school"])
            return {**built, "data_dir": raw["data_dir"]}

        yield Brain(stub, with_brain)


async def test_an_official_account_learners_question_is_answered_by_the_model_once(open_rig, brain):
    rig = await open_rig(mode="safe", config=brain.config)
    assert rig.gateway.own_brain
    await rig.oa.say("o-learner", QUESTION)
    assert await rig.texts("o-learner", 1) == [SHOWN]
    await rig.quiet()
    assert rig.oa.texts_to("o-learner") == [SHOWN]  # in the callback's answer or as a customer-service message, once
    brain.asked_once()


async def test_a_personal_wechat_learners_question_is_answered_by_the_model_once(ilink_rig, brain):
    rig = await ilink_rig(config=brain.config)
    assert rig.gateway.own_brain
    await rig.peer.say("learner@im.wechat", QUESTION)
    assert await rig.texts("learner@im.wechat", 1) == [SHOWN]
    await rig.quiet()
    assert rig.peer.texts_to("learner@im.wechat") == [SHOWN]
    brain.asked_once()
