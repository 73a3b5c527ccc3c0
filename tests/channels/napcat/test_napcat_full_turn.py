"""A full turn on QQ through NapCat: a learner at the OneBot emulator, the real brain, the stub model, and back.

The gateway builds its own brain (persona, house rules, litellm) and reaches the
OpenAI-compatible stub over HTTP; the answer goes back as one ``send_private_msg``
in plain text (QQ shows no markup), as a reply to the learner's message.
"""

from __future__ import annotations

import os
import uuid

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.channels.napcat.conftest import account_settings
from tests.contract.harness import eventually, settled
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply
from tests.peers.napcat_server import NapcatServer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "什么是光合作用？"
ANSWER = "Plants use **light** to turn water and carbon dioxide into sugar. What do you think the sugar is for?"
SHOWN = "Plants use light to turn water and carbon dioxide into sugar. What do you think the sugar is for?"


async def test_a_learner_in_a_private_chat_gets_the_models_answer_once_as_plain_text(tmp_path, monkeypatch, token_env):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    async with NapcatServer(token=uuid.uuid4().hex) as server, ModelStub() as stub:
        os.environ[token_env] = server.token
        config = parse_config(e2e_config(tmp_path / "data", stub.api_base, channel="napcat", account="qq",
                                         account_settings=account_settings(server, token_env)))
        gateway = Gateway(config)
        await gateway.start()
        try:
            assert gateway.channel("napcat", "qq") is not None, gateway.unavailable
            await server.connected()
            stub.script(Reply.text(ANSWER, chunk=8, pause=0.05))
            said = await server.say(QUESTION, user=40001)

            def done():
                shown = server.shown("40001")
                return shown if shown and settled(gateway) else None

            [answer] = await eventually(done, what="the answer in the learner's QQ")
            assert answer.text == SHOWN and answer.reply_to == str(said.message_id)
            [request] = stub.requests
            assert request["messages"][-1] == {"role": "user", "content": QUESTION}
        finally:
            await gateway.stop()
