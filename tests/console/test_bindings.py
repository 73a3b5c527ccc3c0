"""Bindings over real HTTP: which partner answers where, changed in the config file and applied live.

A partner Ada creates in the console answers nowhere until she binds it; once bound to the web chat
(after the partner that answered there is unbound), the learner's next message reaches the new
partner's model -- the stub server sees its model name -- with no restart, and the file says so.
"""

from __future__ import annotations

import html
from contextlib import aclosing
from pathlib import Path

import pytest
import yaml

from gateway.configfile import load_config
from tests.console.partners_rig import serve_file, write_config
from tests.console.rig import csrf_of, hidden, signed_in
from tests.e2e.rig import STUB_KEY_ENV, WebLearner
from tests.peers.model_stub import ModelStub, Reply

pytestmark = [pytest.mark.usefixtures("real_brain"), pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")]






def bindings_in(path: Path) -> list[dict]:
    load_config(path)  # still a file serve starts with
    return yaml.safe_load(path.read_text(encoding="utf-8")).get("bindings") or []


async def test_a_new_partner_bound_in_the_console_answers_the_next_web_chat_message(tmp_path: Path, stub: ModelStub):
    path = write_config(tmp_path, stub.api_base)
    async with serve_file(path, own_brain=True) as running, aclosing(await signed_in(running.url, "ada")) as ada:
        headers = {"x-csrf-token": await csrf_of(ada)}
        version = (await ada.get("/console/api/partners/algebra/bindings")).json()["version"]
        model = {"model": "openai/stub-model-chem", "api_base": stub.api_base, "api_key": f"env:{STUB_KEY_ENV}", "timeout_s": 60}
        made = await ada.post("/console/api/partners", headers=headers, json={
            "partner": {"id": "chemistry", "name": "Chemistry", "model": model}, "version": version})
        assert made.status_code == 201, made.text

        page = await ada.get("/console/partners/chemistry/bindings")
        assert page.status_code == 200 and 'id="no-bindings"' in page.text
        assert '<option value="webchat/default">' in page.text  # bound to her own algebra: hers to bind

        # The whole web chat answers as Algebra: binding Chemistry there too is refused, the file untouched.
        taken = await ada.post("/console/partners/chemistry/bindings", data={
            "csrf": hidden(page.text, "csrf"), "version": hidden(page.text, "version"), "account_ref": "webchat/default"})
        assert taken.status_code == 409 and "'algebra' answers there already" in html.unescape(taken.text)
        assert bindings_in(path) == [{"partner": "algebra", "channel": "webchat"}]

        algebra = await ada.get("/console/partners/algebra/bindings")
        removed = await ada.post("/console/partners/algebra/bindings/remove", data={
            "csrf": hidden(algebra.text, "csrf"), "version": hidden(algebra.text, "version"),
            "channel": "webchat", "account": "default"})
        assert removed.status_code == 303 and removed.headers["location"] == "/console/partners/algebra/bindings?done=removed"
        assert bindings_in(path) == []
        assert "# the web chat answers as Algebra" not in path.read_text(encoding="utf-8")  # it went with its binding

        page = await ada.get("/console/partners/chemistry/bindings")
        added = await ada.post("/console/partners/chemistry/bindings", data={
            "csrf": hidden(page.text, "csrf"), "version": hidden(page.text, "version"), "account_ref": "webchat/default"})
        assert added.status_code == 303, added.text
        assert bindings_in(path) == [{"partner": "chemistry", "channel": "webchat"}]
        shown = (await ada.get("/console/api/partners/chemistry/bindings")).json()
        assert shown["bindings"] == [{"channel": "webchat", "account": "default", "chat": None, "thread": None, "kept_in": "file"}]

        learner = await WebLearner(running.url).open()
        try:
            stub.script(Reply.text("Chemistry here (pangolin)"))
            await learner.say("what is a mole?")
            await learner.wait_for(lambda page: [s for s in page.finished() if "pangolin" in s.text],
                                   what="the new partner's answer in web chat")
            assert stub.requests[-1]["model"] == "stub-model-chem"  # the new partner's model answered, no restart
        finally:
            await learner.close()

    # The file is what a restart reads: Chemistry still answers the web chat.
    assert [(b.partner, b.channel) for b in load_config(path).bindings] == [("chemistry", "webchat")]


async def test_a_teacher_cannot_bind_to_an_account_another_teachers_partner_answers_on(tmp_path: Path, stub: ModelStub):
    path = write_config(tmp_path, stub.api_base)
    async with serve_file(path) as running, aclosing(await signed_in(running.url, "ben")) as ben:
        headers = {"x-csrf-token": await csrf_of(ben)}
        shown = (await ben.get("/console/api/partners/biology/bindings")).json()
        assert shown["accounts"] == []  # the only account answers as Ada's algebra
        for place in ({"channel": "webchat"}, {"channel": "webchat", "chat": "one-chat-of-it"}):
            refused = await ben.post("/console/api/partners/biology/bindings", headers=headers,
                                     json={"binding": place, "version": shown["version"]})
            assert refused.status_code == 403, refused.text
        nowhere = await ben.post("/console/api/partners/biology/bindings", headers=headers,
                                 json={"binding": {"channel": "telegram", "account": "nope"}, "version": shown["version"]})
        assert nowhere.status_code == 400 and "no channel account telegram/nope" in nowhere.json()["error"]
        assert (await ben.get("/console/api/partners/algebra/bindings")).status_code == 404  # not his: not there
        bad = await ben.post("/console/api/partners/biology/bindings", headers=headers, content=b"{not json")
        assert bad.status_code == 400
        wrong = await ben.post("/console/api/partners/biology/bindings", headers=headers, json={"binding": {"chan": 1}})
        assert wrong.status_code == 422
        stale = await ben.post("/console/api/partners/biology/bindings/remove", headers=headers,
                               json={"binding": {"channel": "webchat"}, "version": "not-the-version"})
        assert stale.status_code == 409 and "changed since this page was loaded" in stale.json()["error"]
    assert bindings_in(path) == [{"partner": "algebra", "channel": "webchat"}]
