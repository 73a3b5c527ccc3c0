"""A full turn on Matrix: a learner asks in a direct room, the real brain answers through the stub model.

The gateway builds its own brain (persona, house rules, session log, litellm)
with the partner's model on the OpenAI-compatible stub on 127.0.0.1; the
learner speaks only through Synapse.  (Named ``test_matrix_full_turn`` because
a test module's basename must be unique across the tree's rootdir-relative dirs.)
"""

from __future__ import annotations

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import eventually, settled
from tests.contract.matrix_harness import MatrixHarness
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.matrix_client import shown_messages
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "What is photosynthesis?"
ANSWER = "Plants use light to turn water and carbon dioxide into sugar. What do you think the sugar is for?"


async def test_a_matrix_learner_gets_the_brains_streamed_answer_once_in_the_room(synapse, tmp_path, monkeypatch):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    harness = MatrixHarness(synapse)
    await harness.start(tmp_path)
    try:
        async with ModelStub() as stub:
            stub.script(Reply.text(ANSWER, chunk=4, pause=0.05))
            matrix = harness.raw_config(tmp_path / "data")["channels"]["matrix"]["main"]
            settings = {k: v for k, v in matrix.items() if k != "access"}
            config = parse_config(e2e_config(tmp_path / "data", stub.api_base, channel="matrix", account="main",
                                             account_settings=settings))
            gateway = Gateway(config)
            await gateway.start()
            try:
                assert gateway.channel("matrix", "main") is not None, gateway.unavailable
                learner = harness.new_user("ann")
                room = await learner.create_room(invite=[harness.bot.user_id], direct=True)
                await learner.say(room, QUESTION)

                async def answered():
                    shown = shown_messages(await learner.events(room), harness.bot.user_id)
                    return shown if shown and shown[-1]["content"]["body"] == ANSWER and settled(gateway) else None

                [message] = await eventually(answered, what="the brain's answer in the room")
                [request] = stub.requests
                assert request["stream"] is True
                assert request["messages"][0]["role"] == "system"
                assert request["messages"][1:] == [{"role": "user", "content": QUESTION}]
                assert message["content"]["formatted_body"].startswith("<p>Plants use light")
                assert message["edits"] >= 1, "the answer was not streamed into one message by m.replace edits"
            finally:
                await gateway.stop()
    finally:
        await harness.stop()
