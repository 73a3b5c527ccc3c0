"""A full turn on Telegram: a learner at the Bot API emulator, the real brain, the stub model, and back.

Nothing in between is faked: the gateway builds its own brain (persona, house
rules, session log, litellm), reaches the OpenAI-compatible stub over HTTP,
and answers through python-telegram-bot against the emulator.  The checks read
what the learner's chat shows and what the model was asked.
"""

from __future__ import annotations

import html
import os
import uuid

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.channels.telegram.conftest import new_group, new_id
from tests.contract.harness import eventually, settled
from tests.e2e.rig import STUB_KEY_ENV, e2e_config
from tests.peers.model_stub import ModelStub, Reply
from tests.peers.telegram_peer import TelegramUsers

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

QUESTION = "What is photosynthesis?"
ANSWER = "Plants use **light** to turn water and carbon dioxide into sugar. What do you think the sugar is for?"
SHOWN = "Plants use light to turn water and carbon dioxide into sugar. What do you think the sugar is for?"


@pytest.fixture
async def turn(telegram_api, tmp_path, monkeypatch):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain
    token, variable = f"{new_id()}:{uuid.uuid4().hex}", f"TELEGRAM_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    monkeypatch.setenv(variable, token)
    users = TelegramUsers(telegram_api, token)
    await users.register(privacy=True)
    async with ModelStub() as stub:
        settings = {"token": f"env:{variable}", "api_url": telegram_api, "poll_timeout": 2,
                    "access": {"dm": "open", "group": "mention"}}
        config = parse_config(e2e_config(tmp_path / "data", stub.api_base, channel="telegram", account="main",
                                         account_settings=settings))
        gateway = Gateway(config)
        await gateway.start()
        try:
            assert gateway.channel("telegram", "main") is not None, gateway.unavailable
            yield users, stub, gateway
        finally:
            await gateway.stop()
            await users.aclose()
            os.environ.pop(variable, None)


async def answered(users: TelegramUsers, gateway: Gateway, chat: int) -> list[dict]:
    async def done():
        shown = (await users.seen()).get(str(chat), [])
        return shown if shown and shown[-1]["text"] == SHOWN and settled(gateway) else None

    return await eventually(done, what="the answer in the learner's chat")


async def test_a_learner_in_a_private_chat_gets_the_answer_streamed_as_a_draft_then_one_message(turn):
    users, stub, gateway = turn
    stub.script(Reply.text(ANSWER, chunk=4, pause=0.05))
    chat = new_id()
    asked = await users.say(chat, QUESTION)
    [message] = await answered(users, gateway, chat)
    assert message["reply_to"] == asked["message_id"]
    assert "<b>light</b>" in html.unescape(message["html"])  # Markdown rendered to Telegram HTML
    drafts = [d for d in (await users.info())["drafts"] if d["chat_id"] == chat]
    assert drafts, "the answer was not streamed: no draft was shown while the model wrote"
    assert len({d["draft_id"] for d in drafts}) == 1
    assert all(SHOWN.startswith(d["text"].replace("*", "").rstrip()) for d in drafts), [d["text"] for d in drafts]
    assert len((await users.seen())[str(chat)]) == 1  # the drafts left no message behind
    [request] = stub.requests
    assert request["stream"] is True
    assert request["messages"][-1] == {"role": "user", "content": QUESTION}


async def test_a_learner_in_a_forum_topic_gets_the_answer_in_that_topic_edited_in_place(turn):
    users, stub, gateway = turn
    stub.script(Reply.text(ANSWER, chunk=4, pause=0.05))
    forum = {"id": new_group(), "type": "supergroup", "is_forum": True, "title": "Biology"}
    asked = await users.say(forum, QUESTION, user=new_id(), thread=12, mention=True)
    [message] = await answered(users, gateway, forum["id"])
    assert message["thread"] == 12 and message["reply_to"] == asked["message_id"]
    [request] = stub.requests
    assert QUESTION in request["messages"][-1]["content"]


async def test_a_photo_telegram_cannot_hand_over_reaches_the_model_as_a_note_and_gets_one_answer(turn):
    """The update is acked first; the download fails after it.  The model is told, in the learner's
    message, what it cannot see, and the learner gets exactly one answer -- never silence."""
    users, stub, gateway = turn
    stub.script(Reply.text(ANSWER))
    await users.faults(file_status=500)
    chat = new_id()
    await users.say(chat, "is my drawing right?", media={"kind": "photo", "hex": (b"\xff\xd8" * 50).hex()})
    [message] = await answered(users, gateway, chat)
    assert message["text"] == SHOWN
    [request] = stub.requests
    said = request["messages"][-1]
    assert said["role"] == "user" and "is my drawing right?" in said["content"]
    assert "the learner sent an image" in said["content"]
    assert "could not be fetched: telegram did not hand it over (file download answered HTTP 500)" in said["content"]
    assert len((await users.seen())[str(chat)]) == 1
