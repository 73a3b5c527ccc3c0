"""Console edits reach real turns without a restart: web chat, the chat panel and "test the model", all over loopback.

The gateway builds its real brain from a config file on disk; litellm reaches the stub model server
(``tests/peers/model_stub.py``) over HTTP, and the learner speaks only through the web chat's own API.
"""

from __future__ import annotations

import socket
from contextlib import aclosing
from pathlib import Path

import pytest

from tests.console.brain_rig import STUB_KEY
from tests.console.partners_rig import serve_file, write_config
from tests.console.rig import csrf_of, hidden, signed_in
from tests.e2e.rig import STUB_KEY_ENV, WebLearner
from tests.peers.model_stub import ModelStub, Reply

pytestmark = [pytest.mark.usefixtures("real_brain"), pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")]






def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def settings(http, partner: str) -> dict:
    response = await http.get(f"/console/api/partners/{partner}/settings")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_an_edited_model_answers_the_next_web_chat_turn_without_a_restart(tmp_path: Path, stub: ModelStub):
    path = write_config(tmp_path, stub.api_base)
    async with serve_file(path, own_brain=True) as running, aclosing(await signed_in(running.url, "ada")) as ada:
        learner = await WebLearner(running.url).open()
        try:
            await learner.say("first question")
            await learner.wait_for(lambda page: len(page.finished()) >= 1, what="the first answer")
            assert stub.requests[-1]["model"] == "stub-model"
            detail = await settings(ada, "algebra")
            model = {**detail["partner"]["model"], "model": "openai/stub-model-two"}
            saved = await ada.put("/console/api/partners/algebra", headers={"x-csrf-token": await csrf_of(ada)},
                                  json={"partner": {**detail["partner"], "model": model, "owners": None},
                                        "version": detail["version"]})
            assert saved.status_code == 200, saved.text
            assert "model: openai/stub-model-two" in path.read_text(encoding="utf-8")
            assert f"api_key: env:{STUB_KEY_ENV}" in path.read_text(encoding="utf-8")  # the reference, not the key
            stub.script(Reply.text("second answer from the edited model (kinkajou)"))
            await learner.say("second question")
            shown = await learner.wait_for(
                lambda page: [s for s in page.finished() if "kinkajou" in s.text], what="the edited partner's answer")
            assert shown and stub.requests[-1]["model"] == "stub-model-two"
        finally:
            await learner.close()


async def test_a_new_partner_answers_in_the_chat_panel_and_its_model_is_tested(tmp_path: Path, stub: ModelStub):
    path = write_config(tmp_path, stub.api_base)
    async with serve_file(path, own_brain=True) as running, aclosing(await signed_in(running.url, "ben")) as ben:
        token = await csrf_of(ben)
        version = (await settings(ben, "biology"))["version"]
        model = {"model": "openai/stub-model", "api_base": stub.api_base, "api_key": f"env:{STUB_KEY_ENV}", "timeout_s": 60}
        made = await ben.post("/console/api/partners", headers={"x-csrf-token": token}, json={
            "partner": {"id": "chemistry", "name": "Chemistry", "model": model}, "version": version})
        assert made.status_code == 201, made.text

        tested = await ben.post("/console/api/partners/chemistry/test-model", headers={"x-csrf-token": token})
        assert tested.status_code == 200 and tested.json()["ok"] is True, tested.text
        assert isinstance(tested.json()["latency_ms"], int)
        assert stub.requests[-1]["max_tokens"] == 1

        stub.script(Reply.text("Atoms share electrons in a covalent bond (okapi)."))
        answer = await ben.post("/console/api/partners/chemistry/chat", headers={"x-csrf-token": token},
                                json={"text": "what is a covalent bond?"})
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"reply": "Atoms share electrons in a covalent bond (okapi)."}
        assert "what is a covalent bond?" in str(stub.requests[-1]["messages"])

        searched = await ben.get("/console/api/partners/chemistry/knowledge/search", params={"q": "photosynthesis"})
        assert searched.status_code == 200, searched.text  # the brain's knowledge service knows the new partner too

        page = await ben.get("/console/partners/chemistry")
        stub.script(Reply.text("The page shows this answer (tapir)."))
        panel = await ben.post("/console/partners/chemistry/chat", data={"csrf": hidden(page.text, "csrf"), "text": "and ions?"})
        assert panel.status_code == 200 and "The page shows this answer (tapir)." in panel.text


async def test_a_model_that_is_not_there_is_shown_with_the_reason_and_no_secret(tmp_path: Path, stub: ModelStub):
    path = write_config(tmp_path, stub.api_base)
    async with serve_file(path, own_brain=True) as running, aclosing(await signed_in(running.url, "root")) as root:
        detail = await settings(root, "algebra")
        model = {**detail["partner"]["model"], "api_base": f"http://127.0.0.1:{closed_port()}/v1"}
        saved = await root.put("/console/api/partners/algebra", headers={"x-csrf-token": await csrf_of(root)},
                               json={"partner": {**detail["partner"], "model": model}, "version": detail["version"]})
        assert saved.status_code == 200, saved.text
        page = await root.get("/console/partners/algebra")
        tested = await root.post("/console/partners/algebra/test-model", data={"csrf": hidden(page.text, "csrf")})
        assert tested.status_code == 200 and 'data-ok="no"' in tested.text
        assert "nothing answers at" in tested.text
        assert STUB_KEY not in tested.text


async def test_an_edited_soul_speaks_in_the_next_turn(tmp_path: Path, stub: ModelStub):
    path = write_config(tmp_path, stub.api_base)
    soul = "You are Algebra, who always answers with a worked example first (wombat)."
    async with serve_file(path, own_brain=True) as running, aclosing(await signed_in(running.url, "root")) as root:
        token = await csrf_of(root)
        current = (await root.get("/console/api/personas/study-buddy")).json()
        saved = await root.put("/console/api/personas/study-buddy", headers={"x-csrf-token": token},
                               json={**current, "soul": soul})
        assert saved.status_code == 200, saved.text
        answer = await root.post("/console/api/partners/algebra/chat", headers={"x-csrf-token": token}, json={"text": "2x = 6?"})
        assert answer.status_code == 200, answer.text
        system = stub.requests[-1]["messages"][0]
        assert system["role"] == "system" and soul in str(system["content"])
