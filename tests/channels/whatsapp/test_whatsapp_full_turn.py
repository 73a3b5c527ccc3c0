"""A full turn on WhatsApp: a learner at the Cloud API emulator, the real brain, the stub model, and back.

The gateway builds its own brain and reaches the OpenAI-compatible stub over
HTTP; the learner's message is posted signed, as Meta posts it, and the answer
is read from what the emulated WhatsApp showed the learner -- in WhatsApp's own
markup (``*bold*``), free-form inside the window.
"""

from __future__ import annotations

import pytest

from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "¿Qué es la fotosíntesis?"
ANSWER = "Plants use **light** to make sugar. What is the sugar for?"
SHOWN = "Plants use *light* to make sugar. What is the sugar for?"
LEARNER = "15551230042"


async def test_a_whatsapp_learners_question_is_answered_by_the_model_once(whatsapp_rig, monkeypatch, tmp_path):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    async with ModelStub() as stub:
        stub.script(Reply.text(ANSWER, chunk=8, pause=0.01))

        def with_brain(raw: dict) -> dict:
            built = e2e_config(tmp_path / "brain", stub.api_base, channel="whatsapp", account="school",
                               account_settings=raw["channels"]["whatsapp"]["school"])
            return {**built, "data_dir": raw["data_dir"]}

        rig = await whatsapp_rig(config=with_brain)
        assert rig.gateway.own_brain
        wamid = await rig.peer.say(LEARNER, QUESTION)
        assert await rig.texts(LEARNER, 1) == [SHOWN]
        await rig.quiet()
        assert rig.peer.texts_to(LEARNER) == [SHOWN] and [s.kind for s in rig.peer.shown] == ["text"]
        assert rig.peer.deliveries == [(wamid, 200)]
        [request] = stub.requests
        assert request["messages"][-1] == {"role": "user", "content": QUESTION}
