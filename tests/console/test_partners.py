"""The Partners area over real HTTP: partners created, edited and deleted in the gateway's own config file.

Every edit is checked three ways: what the console answers, what the file on disk now holds --
re-read with ``parse_config``/``load_config``, the path ``serve`` takes, with its comments still
there -- and what the running gateway routes by, without a restart.
"""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

import pytest
import yaml

from gateway.configfile import load_config, parse_config
from tests.console.partners_rig import KEPT_COMMENTS, serve_file, write_config
from tests.console.rig import csrf_of, hidden, serve_console, signed_in

NEW = {"id": "chemistry", "name": "Chemistry", "persona": "socratic-math", "greeting": "Hello, chemist-axolotl",
       "tool_rules": [{"remove": ["schedule_reminder"], "kind": "group"}]}


@pytest.fixture
async def served(tmp_path: Path):
    path = write_config(tmp_path)
    async with serve_file(path) as running:
        yield running, path


def on_disk(path: Path) -> dict:
    """The file as ``serve`` would load it (validated), and as plain YAML (what it spells)."""
    load_config(path)
    return yaml.safe_load(path.read_text(encoding="utf-8"))


async def version_of(http, partner: str) -> str:
    response = await http.get(f"/console/api/partners/{partner}/settings")
    assert response.status_code == 200, response.text
    return response.json()["version"]


async def test_a_partner_is_created_edited_and_deleted_in_the_file_with_its_comments_kept(served):
    running, path = served
    async with aclosing(await signed_in(running.url, "root")) as root:
        token = await csrf_of(root)
        headers = {"x-csrf-token": token}
        version = await version_of(root, "algebra")
        made = await root.post("/console/api/partners", json={"partner": {**NEW, "owners": [{"channel": "telegram", "user": "100"}]},
                                                              "version": version}, headers=headers)
        assert made.status_code == 201, made.text
        assert made.json()["partner"]["greeting"] == NEW["greeting"]
        text = path.read_text(encoding="utf-8")
        assert all(comment in text for comment in KEPT_COMMENTS), text
        assert "mid_turn: queue      # a key the console does not edit: kept as written" in text
        entry = next(p for p in on_disk(path)["partners"] if p["id"] == "chemistry")
        assert entry == {**NEW, "owners": [{"channel": "telegram", "user": "100"}]}
        assert running.gateway.router.partner("chemistry") is not None  # live: no restart
        assert running.gateway.router.partner("chemistry").greeting == NEW["greeting"]

        saved = await root.put("/console/api/partners/chemistry", headers=headers, json={
            "partner": {**NEW, "name": "Chemistry II", "model": {"model": "openai/gpt-4o-mini", "api_key": "env:CHEM_KEY_QUARTZ"}},
            "version": made.json()["version"]})
        assert saved.status_code in (200, 400), saved.text
        # env:CHEM_KEY_QUARTZ is unset: the file would not load, so the console says so and writes nothing
        assert saved.status_code == 400 and "CHEM_KEY_QUARTZ" in saved.json()["error"]
        assert next(p for p in on_disk(path)["partners"] if p["id"] == "chemistry")["name"] == "Chemistry"
        saved = await root.put("/console/api/partners/chemistry", headers=headers, json={
            "partner": {**NEW, "name": "Chemistry II", "model": {"model": "openai/gpt-4o-mini", "temperature": 0.2}},
            "version": made.json()["version"]})
        assert saved.status_code == 200, saved.text
        entry = next(p for p in on_disk(path)["partners"] if p["id"] == "chemistry")
        assert entry["name"] == "Chemistry II" and entry["model"] == {"model": "openai/gpt-4o-mini", "temperature": 0.2}
        assert entry["owners"] == [{"channel": "telegram", "user": "100"}]
        assert running.gateway.config.partner("chemistry").name == "Chemistry II"

        gone = await root.delete(f"/console/api/partners/chemistry?version={saved.json()['version']}", headers=headers)
        assert gone.status_code == 200 and gone.json() == {"deleted": "chemistry"}
        assert [p["id"] for p in on_disk(path)["partners"]] == ["algebra", "geometry", "biology"]
        assert all(comment in path.read_text(encoding="utf-8") for comment in KEPT_COMMENTS)
        assert running.gateway.router.partner("chemistry") is None
        assert (await root.get("/console/api/partners/chemistry")).status_code == 404


async def test_the_pages_create_edit_and_delete_with_a_confirmation(served):
    running, path = served
    async with aclosing(await signed_in(running.url, "ada")) as ada:
        page = await ada.get("/console/new-partner")
        assert page.status_code == 200 and 'name="owners"' not in page.text  # a teacher sets no owners
        form = {"csrf": hidden(page.text, "csrf"), "version": hidden(page.text, "version"), "id": "physics",
                "name": "Physics", "persona": "study-buddy", "greeting": "", "model": "", "tool_rules": ""}
        made = await ada.post("/console/new-partner", data=form)
        assert made.status_code == 303 and made.headers["location"] == "/console/partners/physics?saved=1", made.text
        entry = next(p for p in on_disk(path)["partners"] if p["id"] == "physics")
        assert entry == {"id": "physics", "name": "Physics", "owners": [{"channel": "telegram", "user": "100"}]}  # Ada owns it
        home = (await ada.get("/console/")).text
        assert 'data-partner="physics"' in home

        page = await ada.get("/console/partners/physics")
        assert page.status_code == 200 and 'value="Physics"' in page.text
        edit = {**form, "version": hidden(page.text, "version"), "name": "Physics for year 10",
                "tool_rules": "- role: stranger\n  remove: [memory_write]\n"}
        del edit["id"]
        saved = await ada.post("/console/partners/physics", data=edit)
        assert saved.status_code == 303, saved.text
        entry = next(p for p in on_disk(path)["partners"] if p["id"] == "physics")
        assert entry["name"] == "Physics for year 10" and entry["tool_rules"] == [{"remove": ["memory_write"], "role": "stranger"}]

        confirm = await ada.get("/console/partners/physics/delete")
        assert confirm.status_code == 200 and 'id="delete-confirm"' in confirm.text
        unticked = await ada.post("/console/partners/physics/delete",
                                  data={"csrf": form["csrf"], "version": hidden(confirm.text, "version")})
        assert unticked.status_code == 400 and any(p["id"] == "physics" for p in on_disk(path)["partners"])
        deleted = await ada.post("/console/partners/physics/delete", data={
            "csrf": form["csrf"], "version": hidden(confirm.text, "version"), "confirm": "physics"})
        assert deleted.status_code == 303
        assert not any(p["id"] == "physics" for p in on_disk(path)["partners"])


async def test_a_teacher_cannot_edit_or_delete_another_teachers_partner(served):
    running, path = served
    before = path.read_bytes()
    async with aclosing(await signed_in(running.url, "ben")) as ben:
        token = await csrf_of(ben)
        version = await version_of(ben, "biology")
        headers = {"x-csrf-token": token}
        for partner in ("algebra", "geometry"):
            assert (await ben.put(f"/console/api/partners/{partner}", headers=headers,
                                  json={"partner": {"id": partner, "name": "Mine now"}, "version": version})).status_code == 404
            assert (await ben.delete(f"/console/api/partners/{partner}?version={version}", headers=headers)).status_code == 404
            assert (await ben.get(f"/console/partners/{partner}")).status_code == 404
            assert (await ben.post(f"/console/partners/{partner}", data={"csrf": token, "name": "Mine now",
                                                                        "version": version})).status_code == 404
        # and a teacher may not hand their own partner to someone else
        moved = await ben.put("/console/api/partners/biology", headers=headers, json={
            "partner": {"id": "biology", "name": "Biology", "owners": [{"channel": "telegram", "user": "100"}]},
            "version": version})
        assert moved.status_code == 403 and "administrator" in moved.json()["error"]
    assert path.read_bytes() == before


async def test_an_edit_on_a_stale_page_is_refused_with_409_and_changes_nothing(served):
    running, path = served
    async with aclosing(await signed_in(running.url, "ada")) as ada:
        page = await ada.get("/console/partners/algebra")
        stale = hidden(page.text, "version")
        path.write_text(path.read_text(encoding="utf-8") + "# edited by hand meanwhile\n", encoding="utf-8")
        answer = await ada.post("/console/partners/algebra", data={
            "csrf": hidden(page.text, "csrf"), "version": stale, "name": "Algebra I", "persona": "study-buddy"})
        assert answer.status_code == 409 and "changed since this page was loaded" in answer.text
        api = await ada.put("/console/api/partners/algebra", headers={"x-csrf-token": hidden(page.text, "csrf")},
                            json={"partner": {"id": "algebra", "name": "Algebra I"}, "version": stale})
        assert api.status_code == 409
    assert "Algebra I" not in path.read_text(encoding="utf-8")
    assert path.read_text(encoding="utf-8").endswith("# edited by hand meanwhile\n")


@pytest.mark.parametrize(("partner", "status", "words"), [
    ({"id": "Bad Id", "name": "X"}, 400, "partners.yaml:partners.3.id: String should match pattern"),
    ({"id": "chem", "name": "X", "tool_rules": [{"remove": []}]}, 422, "tool_rules.0.remove"),
    ({"id": "chem", "name": "X", "persona": "no-such-persona"}, 400, "no persona folder named 'no-such-persona'"),
    ({"id": "chem", "name": "X", "model": {"model": "openai/x", "api_key": "sk-live-secret"}}, 422, "api_key"),
    ({"id": "algebra", "name": "Again"}, 400, "exists already"),
    ({"id": "chem", "name": "X", "wat": 1}, 422, "wat: Extra inputs are not permitted"),
])
async def test_invalid_input_is_refused_with_the_message_never_a_500(served, partner, status, words):
    running, path = served
    before = path.read_bytes()
    async with aclosing(await signed_in(running.url, "root")) as root:
        version = await version_of(root, "algebra")
        answer = await root.post("/console/api/partners", headers={"x-csrf-token": await csrf_of(root)},
                                 json={"partner": partner, "version": version})
        assert answer.status_code == status, answer.text
        assert words in answer.json()["error"]
        assert "sk-live-secret" not in answer.text
    assert path.read_bytes() == before


async def test_the_form_shows_the_file_error_in_the_page(served):
    running, path = served
    async with aclosing(await signed_in(running.url, "ada")) as ada:
        page = await ada.get("/console/partners/algebra")
        answer = await ada.post("/console/partners/algebra", data={
            "csrf": hidden(page.text, "csrf"), "version": hidden(page.text, "version"), "name": "Algebra",
            "persona": "study-buddy", "tool_rules": "- remove: [x]\n  kind: direct\n  group: g1\n"})
        assert answer.status_code == 400
        assert "a rule naming a group matches only group conversations" in answer.text
        assert 'id="form-error"' in answer.text and "kind: direct" in answer.text  # the draft is kept
        broken = await ada.post("/console/partners/algebra", data={
            "csrf": hidden(page.text, "csrf"), "version": hidden(page.text, "version"), "name": "Algebra",
            "tool_rules": "- remove: [x\n"})
        assert broken.status_code == 400 and "not valid YAML" in broken.text


async def test_bodies_that_are_not_the_shape_are_4xx(served):
    running, _ = served
    async with aclosing(await signed_in(running.url, "root")) as root:
        headers = {"x-csrf-token": await csrf_of(root)}
        for body in (b"[", b"[]", b'{"partner": 3, "version": "x"}', b'{"partner": {}}', b"{" * 100 + b"}" * 100):
            answer = await root.post("/console/api/partners", content=body, headers={**headers, "content-type": "application/json"})
            assert 400 <= answer.status_code < 500, (body, answer.status_code, answer.text)
        assert (await root.post("/console/api/partners", json={"partner": NEW, "version": "x"})).status_code == 403  # no CSRF


async def test_an_edit_survives_a_restart(tmp_path: Path):
    path = write_config(tmp_path)
    async with serve_file(path) as running, aclosing(await signed_in(running.url, "root")) as root:
        made = await root.post("/console/api/partners", headers={"x-csrf-token": await csrf_of(root)},
                               json={"partner": NEW, "version": await version_of(root, "algebra")})
        assert made.status_code == 201, made.text
    async with serve_file(path, with_users=False) as again, aclosing(await signed_in(again.url, "root")) as root:
        listed = (await root.get("/console/api/partners")).json()["partners"]
        assert [p["id"] for p in listed] == ["algebra", "geometry", "biology", "chemistry"]
        assert (await root.get("/console/api/partners/chemistry/settings")).json()["partner"]["greeting"] == NEW["greeting"]


async def test_without_a_config_file_the_page_says_so_and_edits_are_refused(tmp_path: Path):
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "root")) as root:
        page = await root.get("/console/partners/algebra")
        assert page.status_code == 200 and 'id="no-config-file"' in page.text
        answer = await root.put("/console/api/partners/algebra", headers={"x-csrf-token": await csrf_of(root)},
                                json={"partner": {"id": "algebra", "name": "A"}, "version": ""})
        assert answer.status_code == 409 and "edits need a config file" in answer.json()["error"]


def test_the_round_trip_keeps_an_untouched_file_byte_for_byte(tmp_path: Path):
    """Saving a partner's own values again changes nothing in the file (no reformatting of the rest)."""
    import asyncio

    from gateway.atomicfile import version_of as file_version
    from gateway.configedit import ConfigEditor, SavePartner, fields_in

    path = write_config(tmp_path)
    before = path.read_text(encoding="utf-8")
    fields = fields_in(before, "geometry")
    assert fields is not None
    config = asyncio.run(ConfigEditor(path).apply(SavePartner(fields, new=False), file_version(path)))
    assert path.read_text(encoding="utf-8") == before
    assert config == parse_config(yaml.safe_load(before)).model_copy(update={"data_dir": config.data_dir, "source": path})



async def test_the_console_error_is_the_one_the_file_would_get_at_start(served):
    """The same partner written into the file by hand fails ``load_config`` with the very text the console showed."""
    from gateway.core.errors import ConfigError

    running, path = served
    async with aclosing(await signed_in(running.url, "root")) as root:
        version = await version_of(root, "algebra")
        answer = await root.post("/console/api/partners", headers={"x-csrf-token": await csrf_of(root)},
                                 json={"partner": {"id": "Two Words", "name": "X"}, "version": version})
    by_hand = path.read_text(encoding="utf-8").replace("\nbindings:", "\n  - id: Two Words\n    name: X\nbindings:")
    if "bindings:" not in by_hand:
        by_hand += "  - id: Two Words\n    name: X\n"
    path.write_text(by_hand, encoding="utf-8")
    with pytest.raises(ConfigError) as loaded:
        load_config(path)
    assert answer.status_code == 400 and answer.json()["error"] == str(loaded.value)


@pytest.mark.parametrize(("breakage", "words"), [
    (lambda path: path.write_text(path.read_text(encoding="utf-8") + "partners: [unclosed\n", encoding="utf-8"), "not valid YAML"),
    (lambda path: path.write_bytes(path.read_bytes() + b"# caf\xe9\n"), "not UTF-8 text"),
    (lambda path: path.unlink(), "cannot be read"),
])
async def test_a_file_broken_by_hand_meanwhile_is_named_not_a_500(served, breakage, words):
    running, path = served
    async with aclosing(await signed_in(running.url, "root")) as root:
        breakage(path)
        page = await root.get("/console/partners/algebra")
        assert page.status_code == 200  # the page still shows the running partner
        answer = await root.post("/console/partners/algebra", data={
            "csrf": hidden(page.text, "csrf"), "version": hidden(page.text, "version"), "name": "Algebra", "persona": "study-buddy"})
        assert answer.status_code == 400 and words in answer.text, answer.text


async def test_two_saves_from_the_same_page_land_once(served):
    """Two tabs send their edits at once with the version they were shown: one is written, the other is 409."""
    import asyncio

    running, path = served
    async with aclosing(await signed_in(running.url, "root")) as root:
        headers = {"x-csrf-token": await csrf_of(root)}
        version = await version_of(root, "algebra")
        answers = await asyncio.gather(*(root.post("/console/api/partners", headers=headers, json={
            "partner": {"id": f"twin-{n}", "name": f"Twin {n}"}, "version": version}) for n in range(2)))
    assert sorted(a.status_code for a in answers) == [201, 409]
    ids = [p["id"] for p in on_disk(path)["partners"]]
    assert len([i for i in ids if i.startswith("twin-")]) == 1


async def test_testing_a_partner_without_a_model_says_so_in_the_readers_language(served):
    running, _ = served
    async with aclosing(await signed_in(running.url, "ada")) as ada:
        page = await ada.get("/console/partners/algebra")
        tested = await ada.post("/console/partners/algebra/test-model", data={"csrf": hidden(page.text, "csrf")},
                                headers={"accept-language": "zh-CN"})
        assert tested.status_code == 200 and "这里和人设中都没有配置模型" in tested.text
        api = await ada.post("/console/api/partners/algebra/test-model", headers={"x-csrf-token": hidden(page.text, "csrf")})
        assert api.json() == {"ok": False, "model": "", "configured": False, "latency_ms": None,
                              "problems": ["no model is configured, here or in the persona: the partner answers from its notes"]}


async def test_a_partner_a_binding_routes_to_is_not_deleted(tmp_path: Path, monkeypatch):
    from tests.e2e.rig import STUB_KEY_ENV

    monkeypatch.setenv(STUB_KEY_ENV, "sk-unused-basalt-4471")
    path = write_config(tmp_path, "http://127.0.0.1:9/v1")  # algebra is bound to the web chat
    before = path.read_bytes()
    async with serve_file(path) as running, aclosing(await signed_in(running.url, "root")) as root:
        version = await version_of(root, "algebra")
        answer = await root.delete(f"/console/api/partners/algebra?version={version}", headers={"x-csrf-token": await csrf_of(root)})
        assert answer.status_code == 400
        assert "bindings.0.partner: no partner with id 'algebra'" in answer.json()["error"]
        assert running.gateway.router.partner("algebra") is not None
    assert path.read_bytes() == before
