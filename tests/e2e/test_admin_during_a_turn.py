"""A teacher's edit of a learner, through the admin API, while that learner's turn runs (issue 11, item 7).

The gateway builds its real brain; Ann's turn notes a fact, then its next model
call is held at the stub's gate.  The admin API's controls share the turn's
per-person lock (``brain.factory.BuiltBrain.memory``), so a DELETE issued now
waits until the turn has ended -- else the turn's last writes would bring back
the history just deleted -- while an edit of Bob does not wait at all.
"""

from __future__ import annotations

import asyncio
import logging

import httpx

from brain.memory.guarded import TURN_WAIT_S
from gateway.app import Gateway
from gateway.configfile import parse_config
from tests.contract.harness import eventually
from tests.e2e.rig import PARTNER, WebLearner, e2e_config, served
from tests.peers.model_stub import Reply
from tests.waits import HTTP_S

TOKEN = "admin-token-during-a-turn"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def admin_config(tmp_path, api_base, monkeypatch):
    monkeypatch.setenv("ADMIN_TOKEN", TOKEN)
    # allow_from "*": everyone here is a learner (strangers get no memory_write, by the house rule)
    raw = e2e_config(tmp_path / "data", api_base, account_settings={"access": {"dm": "open", "allow_from": ["*"]}})
    raw["http"]["admin_token"] = "env:ADMIN_TOKEN"
    return parse_config(raw)


def memory_url(learner: WebLearner) -> str:
    return f"/api/v1/partners/{PARTNER}/learners/webchat:default:{learner.learner}/memory"


def waiting_for_turns(caplog) -> int:
    return sum("waiting for a running turn" in r.getMessage() for r in caplog.records)


async def test_a_delete_waits_for_the_learners_turn_and_another_learner_does_not(stub, tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="brain.memory.guarded")
    gateway = Gateway(admin_config(tmp_path, stub.api_base, monkeypatch))
    await gateway.start()
    assert gateway.brain is not None
    try:
        async with served(gateway) as url, httpx.AsyncClient(base_url=url, trust_env=False, timeout=HTTP_S) as admin:
            bob, ann = await WebLearner(url).open(), await WebLearner(url).open()
            stub.script(Reply.text("Hello Bob!"))
            await bob.say("Hi, I'm Bob")
            await bob.wait_for(lambda page: page.finished(), what="Bob's answer")

            # Ann's turn notes a fact, then waits at the gate in its second model call, holding her lock.
            stub.script(Reply.tool_calls(("memory_write", {"text": "Ann's exam is on Friday", "key": "exam"})),
                        Reply.text("Noted, good luck!", gated=True))
            before = len(stub.requests)
            await ann.say("My exam is on Friday")
            await eventually(lambda: len(stub.requests) == before + 2, what="Ann's turn at the gate")

            # Bob's notes change at once: his lock is not Ann's.
            edited = await admin.put(memory_url(bob), headers=AUTH, json={"markdown": "Bob likes worked examples."})
            assert edited.status_code == 200, edited.text

            # An edit of Ann that will not wait long enough is refused, clearly, and changes nothing.
            gateway.brain.memory.wait_s = 0.2
            refused = await admin.put(memory_url(ann), headers=AUTH, json={"markdown": "Ann: too early"})
            assert refused.status_code == 409 and "a turn is running for this learner" in refused.json()["error"]
            assert refused.headers["retry-after"]
            gateway.brain.memory.wait_s = TURN_WAIT_S

            # The DELETE waits for the turn; only then does the gate open.
            deleted = asyncio.create_task(admin.delete(memory_url(ann), headers=AUTH))
            await eventually(lambda: waiting_for_turns(caplog) >= 2, what="the DELETE waiting for Ann's turn")
            assert not deleted.done()
            stub.open_gate()
            response = await deleted
            assert response.status_code == 200, response.text
            await ann.wait_for(lambda page: any("Noted, good luck!" in s.text for s in page.finished()), what="Ann's answer")

            # Her turn's writes came before the delete: nothing of the turn came back after it.
            kept = (await admin.get(memory_url(ann), headers=AUTH)).json()
            assert kept["facts"] == [] and kept["history"] == {}, kept
            assert "Ann: too early" not in str(kept) and "Friday" not in str(kept)
            assert "Bob likes worked examples." in (await admin.get(memory_url(bob) + ".md", headers=AUTH)).text
            await ann.close()
            await bob.close()
    finally:
        await gateway.stop()


async def test_the_brains_http_client_is_closed_when_the_gateway_stops(stub, tmp_path, monkeypatch):
    gateway = Gateway(admin_config(tmp_path, stub.api_base, monkeypatch))
    assert gateway.brain is not None
    client = gateway.brain.http
    await gateway.start()
    assert not client.is_closed
    await gateway.stop()
    assert client.is_closed


async def test_a_plugged_in_responder_has_no_memory_controls(tmp_path, monkeypatch):
    from gateway.http.app import build_app
    from tests.pipeline.conftest import ScriptedResponder

    gateway = Gateway(admin_config(tmp_path, "http://127.0.0.1:9/v1", monkeypatch), responder=ScriptedResponder())
    assert gateway.brain is None
    app = build_app(gateway)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        response = await http.get(f"/api/v1/partners/{PARTNER}/learners/webchat:default:ann/memory", headers=AUTH)
    assert response.status_code == 503 and "plugged-in responder" in response.json()["error"]
