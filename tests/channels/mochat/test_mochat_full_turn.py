"""A full turn on a Mochat agent: a learner in a session at the emulator, the real brain, the stub model, and back.

The gateway builds its own brain and reaches the OpenAI-compatible stub over
HTTP; the learner's message is pushed over Socket.IO as Mochat pushes it, and
the answer is read from what the emulated Mochat was sent for the session.
"""

from __future__ import annotations

import uuid

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.channels.mochat.conftest import account_settings
from tests.contract.harness import eventually, settled
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.mochat_server import MochatServer
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "什么是光合作用？"
ANSWER = "Plants use **light** to make sugar. What is the sugar for?"


async def test_a_mochat_learners_question_is_answered_by_the_model_once(monkeypatch, tmp_path):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    env = f"MOCHAT_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    async with ModelStub() as stub, MochatServer() as server:
        stub.script(Reply.text(ANSWER, chunk=8, pause=0.01))
        monkeypatch.setenv(env, server.token)
        raw = e2e_config(tmp_path / "data", stub.api_base, channel="mochat", account="school",
                         account_settings=account_settings(server, env))
        gateway = Gateway(parse_config(raw))
        await gateway.start()
        try:
            assert gateway.own_brain
            await server.connected()
            said = await server.say(QUESTION, session="s-learner1")

            def answered() -> bool:
                return bool(server.shown("s-learner1")) and settled(gateway)

            await eventually(answered, what="the model's answer in the session")
        finally:
            await gateway.stop()
        [sent] = server.shown("s-learner1")
        assert sent.content.strip() == ANSWER
        assert sent.reply_to == said.message_id
        [request] = stub.requests
        assert request["messages"][-1] == {"role": "user", "content": QUESTION}
