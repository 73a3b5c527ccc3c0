"""A full turn on Feishu: a learner at the emulator, the real brain, the stub model, and back on a CardKit card."""

from __future__ import annotations

import os
import uuid

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.channels.feishu.conftest import account_settings
from tests.contract.harness import eventually, settled
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.extras import need_module
from tests.peers.feishu_server import FeishuServer
from tests.peers.model_stub import ModelStub, Reply

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

QUESTION = "What is photosynthesis?"
ANSWER = "Plants use **light** to turn water and carbon dioxide into sugar. What do you think the sugar is for?"


async def test_a_learner_in_a_dm_gets_the_models_answer_once_streamed(tmp_path, monkeypatch):
    need_module("lark_oapi")
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    env = f"FEISHU_SECRET_{uuid.uuid4().hex[:8].upper()}"
    async with FeishuServer() as server, ModelStub() as stub:
        os.environ[env] = server.secret
        config = parse_config(e2e_config(tmp_path / "data", stub.api_base, channel="feishu", account="school",
                                         account_settings=account_settings(server, env)))
        gateway = Gateway(config)
        await gateway.start()
        try:
            assert gateway.channel("feishu", "school") is not None, gateway.unavailable
            await server.connected()
            stub.script(Reply.text(ANSWER, chunk=8, pause=0.1))
            said = await server.say(QUESTION, user="ou_learner1")

            def done():
                shown = [s for s in server.shown(said.chat) if server.finished(s)]
                return shown if shown and settled(gateway) else None

            [answer] = await eventually(done, what="the answer in the learner's Feishu")
            card = server.cards[answer.card]
            assert card.text == ANSWER and not card.streaming  # Feishu's card markdown keeps **bold**
            assert answer.reply_to == said.message_id
            [request] = stub.requests
            assert request["stream"] is True
            assert request["messages"][-1] == {"role": "user", "content": QUESTION}
        finally:
            await gateway.stop()
            os.environ.pop(env, None)
