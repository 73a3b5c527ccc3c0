"""A full turn: a learner at an emulated channel, through the pipeline, the brain and the stub model, and back.

Every test runs a real ``Gateway`` that builds its own brain (``Gateway._build_brain``:
personas, notes, tools, session log, litellm) with the partner's model pointed at the
OpenAI-compatible stub on 127.0.0.1.  The learner speaks only through a channel's peer
-- the web chat's HTTP API (``tests/e2e/rig.py``, which keeps every version of every
bubble) or the relay platform emulator -- and the checks read what the learner saw,
what the stub received, and what the gateway recorded.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import sys
import uuid
from contextlib import closing
from pathlib import Path

import httpx
import pytest
import yaml

from brain.context import HOUSE_RULES, build_request, request_digest
from brain.loop import BrainSettings
from brain.session_log import AssistantSaid, Entry, ModelRequested, SessionLog, TurnEnded
from brain.types import ChatMessage
from gateway.app import Gateway
from gateway.core.config import Config
from gateway.core.messages import AccountId, Address, ChannelName, ChatId, Conversation, ConversationKind
from gateway.pipeline.lanes import STOPPED
from gateway.pipeline.outbox import reply_key
from personas.loader import load_persona
from tests.contract.harness import eventually
from tests.e2e.rig import PARTNER, STUB_KEY_ENV, Shown, WebLearner, accepting, e2e_config
from tests.peers.model_stub import ModelStubProcess, Reply
from tests.peers.relay_platform import RelayClient
from tests.waits import HANG_S, HTTP_S

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What is photosynthesis?"
ANSWER = "Plants use light to turn water and carbon dioxide into sugar. What do you think the sugar is for?"
REASONING = "The learner wants the basics first; keep it short and ask a question back."
NOTES_LINE = "Photosynthesis is how plants, algae and some bacteria make their own food."
SEARCH = ("knowledge_search", {"query": "photosynthesis"})
HIDDEN = re.compile(r"&lt;|think>|tool_call|tool_result|knowledge_search|notes first|basics first", re.IGNORECASE)
"""Markup, tool names and reasoning: nothing a learner may ever see."""


# --------------------------------------------------------------------------- helpers


def assert_persona_then_house_rules(request: dict) -> None:
    """The system prompt opens with the persona -- name, description, SOUL.md -- and the house rules come next."""
    persona = load_persona("study-buddy")
    first = request["messages"][0]
    assert first["role"] == "system"
    system = first["content"]
    assert system.startswith(f"You are {persona.name}."), system[:200]
    head, soul, rest = system.partition(persona.soul)
    assert soul, "SOUL.md is not in the system prompt"
    assert head.strip() == f"You are {persona.name}. {persona.description}"
    assert rest.lstrip().startswith(HOUSE_RULES)


async def settled(gateway: Gateway) -> bool:
    """No lane running, no message waiting, no reply undelivered."""
    depths = await gateway.store.queue_depths()
    return gateway.lanes.active == 0 and not any(depths.inbound_pending.values()) and not any(depths.outbox_open.values())


async def quiet(gateway: Gateway) -> None:
    """Wait until the gateway has nothing left to do, then a little longer: a doubled reply would show by now."""
    await eventually(lambda: settled(gateway), what="the gateway to settle")
    await asyncio.sleep(0.3)


def only_bubble(learner: WebLearner) -> list[Shown]:
    bubbles = learner.bubbles()
    assert len(bubbles) == 1, f"expected one bubble, the page shows {list(bubbles)}"
    return next(iter(bubbles.values()))


def web_address(learner: WebLearner) -> Address:
    return Address(channel=ChannelName("webchat"), account=AccountId("default"),
                   conversation=Conversation(chat=ChatId(learner.learner), kind=ConversationKind.DIRECT))


def sent_wire(message: ChatMessage) -> dict:
    """A logged chat message in the shape compared with what the stub received."""
    return {"role": message.role, "content": message.content,
            "tool_calls": [(c.id, c.name, c.arguments) for c in message.tool_calls],
            "tool_call_id": message.tool_call_id, "name": message.name}


def received_wire(message: dict) -> dict:
    calls = message.get("tool_calls") or []
    return {"role": message["role"], "content": message.get("content") or "",
            "tool_calls": [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls],
            "tool_call_id": message.get("tool_call_id"), "name": message.get("name")}


async def the_log(config: Config) -> list[Entry]:
    """The session log of the test's one learner, read through ``SessionLog`` from ``brain.db`` in the data dir.

    The brain decides the log's key (a conversation's, or a person's when memory follows them across
    chat apps); the test only knows there is one learner, so it takes the one key there is."""
    path = config.data_dir / "brain.db"
    with closing(sqlite3.connect(path)) as db:
        keys = [row[0] for row in db.execute("SELECT DISTINCT conversation FROM session_events")]
    assert len(keys) == 1, f"expected one learner's log, found {keys}"
    log = SessionLog(path)
    try:
        return await log.read(keys[0])
    finally:
        log.close()


def user_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


# --------------------------------------------------------------------------- a) one turn, both ways


async def test_relay_learner_gets_the_streamed_answer_once_as_a_preview_edited_into_the_final(relay):
    relay.stub.script(Reply.text(ANSWER, chunk=4, pause=0.03))
    asked = await relay.client.inject("ann", "ann", QUESTION)

    async def answered():
        messages = (await relay.client.sent()).get("ann", [])
        return messages and messages[-1]["text"] == ANSWER and await settled(relay.gateway)

    await eventually(answered, what="the answer at the relay platform")
    await asyncio.sleep(0.3)

    [message] = (await relay.client.sent())["ann"]
    assert message["reply_to"] == asked["message_id"]
    assert message["edits"] >= 1, "the answer was not streamed: no preview was edited into the final text"
    sends = [a["outcome"] for a in (await relay.client.attempts())["attempts"] if a["chat_id"] == "ann"]
    assert sends == ["posted"], "one message posted (the preview); the final answer is an edit of it"
    [request] = relay.stub.requests
    assert request["stream"] is True
    assert_persona_then_house_rules(request)
    assert request["messages"][1:] == [{"role": "user", "content": QUESTION}]


async def test_web_learner_sees_the_answer_stream_into_one_bubble_that_ends_final(web):
    web.stub.script(Reply.text(ANSWER, chunk=4, pause=0.03))
    await web.learner.say(QUESTION)
    await web.learner.wait_for(lambda page: page.finished(), what="the final answer")
    await quiet(web.gateway)

    versions = only_bubble(web.learner)
    *previews, final = versions
    assert final.final and final.text == ANSWER
    assert previews, "no streamed preview before the final answer"
    assert not any(p.final for p in previews)
    assert all(ANSWER.startswith(p.text) for p in previews), [p.text for p in previews]
    [request] = web.stub.requests
    assert_persona_then_house_rules(request)
    assert request["messages"][-1] == {"role": "user", "content": QUESTION}


# --------------------------------------------------------------------------- b) a tool round trip


@pytest.mark.parametrize("stub", [(), ("tools",)], ids=["native-tools", "text-tool-protocol"], indirect=True)
async def test_a_tool_round_trip_feeds_the_notes_to_the_model_and_shows_only_the_answer(web):
    text_protocol = "tools" in web.stub.rejects
    if text_protocol:  # the model refuses ``tools``: it writes its call as markup, after some reasoning
        call = Reply.markup_tool_call(*SEARCH, before="<think>Check the notes first.</think>", chunk=5, pause=0.01)
    else:
        call = Reply.tool_calls(SEARCH)
    web.stub.script(call, Reply.think(REASONING, ANSWER, chunk=4, pause=0.02))
    await web.learner.say(QUESTION)
    await web.learner.wait_for(lambda page: page.finished(), what="the final answer")
    await quiet(web.gateway)

    # The request after the tool call carries the tool's result: text from the study notes.
    requests = web.stub.requests
    assert len(requests) == (3 if text_protocol else 2)  # text protocol: the first asked with tools and was refused
    after = requests[-1]
    if text_protocol:
        assert "tools" not in after
        [result] = [m["content"] for m in after["messages"] if m["role"] == "user" and m["content"].startswith("<tool_result")]
    else:
        [result] = [m["content"] for m in after["messages"] if m["role"] == "tool"]
        [tool] = [m for m in after["messages"] if m["role"] == "tool"]
        assert (tool["tool_call_id"], tool["name"]) == ("call_stub_0", "knowledge_search")
    assert NOTES_LINE in result and "photosynthesis.md" in result

    # The learner sees the final answer only: never reasoning, never tool markup, not even in a preview.
    versions = only_bubble(web.learner)
    assert versions[-1].final and versions[-1].text == ANSWER
    for shown in versions:
        assert ANSWER.startswith(shown.text), shown.text
        assert not HIDDEN.search(shown.html), shown.html

    # The reasoning is kept for the teacher in the session log.
    said = [e.event for e in await the_log(web.config) if isinstance(e.event, AssistantSaid)]
    assert said[-1].text == ANSWER and said[-1].reasoning == REASONING


@pytest.mark.parametrize("stub", [("tools",)], ids=["text-tool-protocol"], indirect=True)
async def test_switching_to_the_text_tool_protocol_sends_the_question_once(web):
    web.stub.script(Reply.markup_tool_call(*SEARCH), Reply.text(ANSWER))
    await web.learner.say(QUESTION)
    await web.learner.wait_for(lambda page: page.finished(), what="the final answer")
    await quiet(web.gateway)

    refused, *asked = web.stub.requests
    assert "tools" in refused and all("tools" not in request for request in asked)
    for request in web.stub.requests:
        assert user_texts(request).count(QUESTION) == 1, f"the question went out {user_texts(request).count(QUESTION)} times"


# --------------------------------------------------------------------------- c) a real ``partners serve`` process


@pytest.mark.slow
async def test_a_partners_serve_process_answers_a_relay_learner_through_the_stub_model_process(relay_peer, tmp_path):
    token, variable = f"tok-{uuid.uuid4().hex}", "E2E_RELAY_TOKEN"
    client = RelayClient(relay_peer.url, token)
    stub = ModelStubProcess.start()
    gateway: asyncio.subprocess.Process | None = None
    try:
        await accepting(relay_peer.url)
        await accepting(stub.url)
        await client.register()
        settings = {"base_url": relay_peer.url, "token": f"env:{variable}", "poll_timeout": 2}
        config = tmp_path / "partners.yaml"
        config.write_text(yaml.safe_dump(e2e_config(tmp_path / "data", stub.api_base, channel="relay", account="main",
                                                    account_settings=settings)))
        env = {k: v for k, v in os.environ.items() if k != "PARTNERS_RESPONDER"}
        env.update(PYTHONPATH=os.pathsep.join([str(ROOT / "tests" / "plugins"), str(ROOT)]),
                   **{STUB_KEY_ENV: "sk-e2e", variable: token})
        with open(tmp_path / "gateway.log", "wb") as log:
            gateway = await asyncio.create_subprocess_exec(
                str(Path(sys.executable).with_name("partners")), "--config", str(config), "serve", "--port", "0",
                stdout=asyncio.subprocess.PIPE, stderr=log, env=env, cwd=tmp_path,
            )
        assert gateway.stdout is not None
        line = (await asyncio.wait_for(gateway.stdout.readline(), HANG_S)).decode()
        match = re.search(r"(http://127\.0\.0\.1:\d+)", line)
        assert match, f"no ready line: {line!r}\n{(tmp_path / 'gateway.log').read_text(errors='replace')[-3000:]}"
        drain = asyncio.create_task(gateway.stdout.read())

        stub.script(Reply.text(ANSWER, chunk=6, pause=0.01))
        asked = await client.inject("ann", "ann", QUESTION)

        async def answered() -> bool:
            messages = (await client.sent()).get("ann", [])
            if not (messages and messages[-1]["text"] == ANSWER):
                return False
            async with httpx.AsyncClient(trust_env=False) as http:
                report = (await http.get(f"{match.group(1)}/status", timeout=HTTP_S)).json()
            return sum(a["inbound_pending"] + a["outbox_open"] for a in report["accounts"]) == 0

        await eventually(answered, what="the answer from the gateway process")
        await asyncio.sleep(0.3)
        [message] = (await client.sent())["ann"]
        assert message["reply_to"] == asked["message_id"]
        [request] = stub.requests()
        assert_persona_then_house_rules(request)
        assert request["messages"][-1] == {"role": "user", "content": QUESTION}

        gateway.terminate()
        assert await asyncio.wait_for(gateway.wait(), HANG_S) == 0
        assert b"Partners Gateway stopped." in await drain
    finally:
        if gateway is not None and gateway.returncode is None:
            gateway.kill()
            await gateway.wait()
        stub.stop()
        await client.aclose()


# --------------------------------------------------------------------------- d) every request, rebuilt from the log


async def test_every_model_request_can_be_rebuilt_from_the_session_log(web):
    turns = [
        (QUESTION, [Reply.tool_calls(SEARCH), Reply.think(REASONING, ANSWER, chunk=6)]),
        ("Is the sugar food for the plant?", [Reply.text("Yes: the plant uses it for energy and to grow.", chunk=6)]),
        ("Thanks!", [Reply.think("Wrap up kindly.", "You're welcome! Want a quick quiz next time?", chunk=6)]),
    ]
    for number, (text, replies) in enumerate(turns, 1):
        web.stub.script(*replies)
        await web.learner.say(text)
        await web.learner.wait_for(lambda page, number=number: len(page.finished()) == number, what=f"answer {number}")
    await quiet(web.gateway)

    entries = await the_log(web.config)
    settings = web.config.partner(PARTNER).model
    assert settings is not None
    requested = [i for i, entry in enumerate(entries) if isinstance(entry.event, ModelRequested)]
    assert len(requested) == len(web.stub.requests) == 4  # the tool round made turn one two requests

    for index, received in zip(requested, web.stub.requests, strict=True):
        recorded = entries[index].event
        rebuilt = build_request(entries[:index], settings, history_tokens=BrainSettings().history_tokens)
        assert request_digest(rebuilt) == recorded.digest, f"request {recorded.round} of turn {recorded.turn}"
        assert [sent_wire(m) for m in rebuilt.messages] == [received_wire(m) for m in received["messages"]]
        assert [t.name for t in rebuilt.tools] == [t["function"]["name"] for t in received.get("tools", [])]

    last = web.stub.requests[-1]["messages"]
    assert [m["role"] for m in last[1:]] == ["user", "assistant", "tool", "assistant", "user", "assistant", "user"]
    assert REASONING not in str(web.stub.requests), "reasoning went back to the model"


# --------------------------------------------------------------------------- e) /stop through the whole stack


async def test_stop_mid_turn_ends_it_with_one_stopped_reply_covering_both_messages(web):
    story = "Photosynthesis is a long story. " * 20
    web.stub.script(Reply.text(story, chunk=8, pause=0.4))  # ~30 s to finish
    first = await web.learner.say(QUESTION)
    await web.learner.wait_for(lambda page: page.shown, what="the preview of the answer")
    stop = await web.learner.say("/stop")
    await web.learner.wait_for(lambda page: page.finished(), what="the stopped reply")
    await quiet(web.gateway)

    versions = only_bubble(web.learner)  # the preview became the stopped reply; nothing else was sent
    assert versions[-1].final and versions[-1].text == STOPPED
    assert all(not v.final and story.startswith(v.text) for v in versions[:-1]), versions
    assert len(web.stub.requests) == 1, "the stopped turn ran again"
    item = await web.gateway.store.get_reply(reply_key(web_address(web.learner), first))
    assert item is not None and item.reply.in_reply_to == (first, stop)
    ended = [e.event.outcome for e in await the_log(web.config) if isinstance(e.event, TurnEnded)]
    assert ended == ["stopped"]


# --------------------------------------------------------------------------- f) a mid-turn message joins the turn


async def test_a_message_sent_mid_turn_joins_the_running_turn_of_a_merge_partner(open_web, stub):
    later = "And why are leaves green?"
    answer = "Both good questions: plants make sugar from light, and chlorophyll reflects green light."
    stub.script(Reply.tool_calls(SEARCH, delay=1.0), Reply.text(answer, chunk=6))  # round one takes a second
    web = await open_web(stub, mid_turn="merge")
    first = await web.learner.say(QUESTION)
    await eventually(lambda: len(stub.requests) == 1, what="the first round to be running")
    second = await web.learner.say(later)
    await web.learner.wait_for(lambda page: page.finished(), what="the answer")
    await quiet(web.gateway)

    assert len(stub.requests) == 2
    assert user_texts(stub.requests[0]) == [QUESTION]
    assert user_texts(stub.requests[1]) == [QUESTION, later]
    versions = only_bubble(web.learner)
    assert versions[-1].final and versions[-1].text == answer
    item = await web.gateway.store.get_reply(reply_key(web_address(web.learner), first))
    assert item is not None and item.reply.in_reply_to == (first, second)
