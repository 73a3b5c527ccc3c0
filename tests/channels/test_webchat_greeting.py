"""First contact on the web chat, over real HTTP: the partner's name on the page, its greeting for a new session.

The gateway is the real one (real brain, no model: the partner answers
offline from its notes) on a durable data dir; the learner is
:class:`~tests.e2e.rig.WebLearner`, posting as the page does.  A new page
session posts ``/start`` first with the id ``start`` (see
``static/app.js``), hidden from the learner's own bubbles.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.messages import Address, Conversation, ConversationKind
from gateway.pipeline.outbox import reply_key
from tests.contract.harness import eventually, settled
from tests.e2e.rig import WebLearner, served

pytestmark = pytest.mark.timeout(120)

NAME = "Algebra <Ace> & Co"
GREETING = "Welcome to **algebra**! Send me an equation you're stuck on."


def config_for(data_dir: Path, **partner: Any):
    return parse_config({
        "data_dir": str(data_dir),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "algebra", "name": NAME, "persona": "study-buddy", **partner}],
        "bindings": [{"partner": "algebra", "channel": "webchat", "account": "default"}],
        "channels": {"webchat": {"default": {"access": {"dm": "open"}}}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
    })


async def open_chat(learner: WebLearner) -> None:
    """What the page does for a session the gateway has just started."""
    response = await learner.http.post("/api/messages", json={"message_id": "start", "text": "/start"})
    assert response.status_code == 202, response.text


def finals(learner: WebLearner) -> list[str]:
    return [shown.text for shown in learner.finished()]


async def test_the_page_shows_the_partners_name_escaped_not_study_partner(tmp_path):
    async with Gateway(config_for(tmp_path / "data")) as gateway, served(gateway) as url:
        async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
            page = (await http.get(f"{url}/channels/webchat/default/")).text

    assert "<title>Algebra &lt;Ace&gt; &amp; Co</title>" in page
    assert "<h1>Algebra &lt;Ace&gt; &amp; Co</h1>" in page
    assert "Algebra &lt;Ace&gt; &amp; Co is writing…" in page
    assert "Study partner" not in page and NAME not in page


async def test_a_configured_title_still_wins(tmp_path):
    config = config_for(tmp_path / "data")
    config = config.model_copy(update={"channels": {"webchat": {"default": {"access": {"dm": "open"}, "title": "Room 12"}}}})
    async with Gateway(config) as gateway, served(gateway) as url:
        async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
            page = (await http.get(f"{url}/channels/webchat/default/")).text

    assert "<title>Room 12</title>" in page


async def test_a_new_session_gets_the_greeting_once_even_across_a_restart(tmp_path):
    data = tmp_path / "data"
    async with Gateway(config_for(data, greeting=GREETING)) as gateway, served(gateway) as url:
        learner = await WebLearner(url).open()
        try:
            await open_chat(learner)
            await learner.wait_for(lambda page: finals(page), timeout=60, what="the greeting")
            await open_chat(learner)  # the page retries after a lost 202: the same id, deduplicated
            await learner.say("what is photosynthesis?")
            await learner.wait_for(lambda page: len(finals(page)) == 2, timeout=60, what="the answer")
            await eventually(lambda: settled(gateway), timeout=60, what="the gateway to settle")
        finally:
            await learner.close()
    greeting, answer = finals(learner)
    assert greeting == "Welcome to algebra! Send me an equation you're stuck on."
    assert "<strong>algebra</strong>" in learner.finished()[0].html
    address = Address(channel="webchat", account="default",
                      conversation=Conversation(chat=learner.learner, kind=ConversationKind.DIRECT))
    assert learner.finished()[0].id == reply_key(address, f"{learner.learner}.start", "greeting") + ":0"
    assert "Photosynthesis is how plants" in answer  # the turn after the greeting is answered as usual
    assert "For my teacher" not in answer and "persona.yaml" not in answer

    async with Gateway(config_for(data, greeting=GREETING)) as gateway, served(gateway) as url:
        again = await WebLearner(url, session=learner.session).open()
        fresh = await WebLearner(url).open()
        try:
            await open_chat(again)  # a page that never heard back before the restart sends it once more
            await open_chat(fresh)
            await fresh.wait_for(lambda page: finals(page), timeout=60, what="the new session's greeting")
            await eventually(lambda: settled(gateway), timeout=60, what="the gateway to settle")
            await asyncio.sleep(0.3)
        finally:
            await again.close()
            await fresh.close()
    assert again.shown == []  # no second greeting for the same session
    assert finals(fresh) == [greeting]


async def test_without_a_greeting_of_its_own_the_partner_uses_its_personas(tmp_path):
    async with Gateway(config_for(tmp_path / "data")) as gateway, served(gateway) as url:
        learner = await WebLearner(url).open()
        try:
            await open_chat(learner)
            [greeting] = await learner.wait_for(lambda page: finals(page), timeout=60, what="the greeting")
        finally:
            await learner.close()
    assert greeting == "Hi! I'm Study Buddy. Tell me what you're working on and we'll figure it out together."
