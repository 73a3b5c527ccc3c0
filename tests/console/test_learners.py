"""The Learners area over real HTTP: whose learners a teacher sees, and their memory viewed, edited, exported, forgotten.

The gateway runs its own brain (``own_brain``): the learners are made through its memory controls as
the chat's ``/link`` would make them, their conversations written to its session log, their usage to
its ledger -- the same files the turns use.  Ada's ``algebra`` has learners Xia and Yuri; Ben's
``biology`` has Zoe.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from pathlib import Path

import pytest

from brain.memory.scopes import Identity, learner_scope, person_history_key, person_lock_key
from brain.session_log import AssistantSaid, UserSaid
from brain.types import Usage
from tests.console.rig import ADA_ID, BEN_ID, csrf_of, serve_console, signed_in

X_NOTE, Y_NOTE, Z_NOTE = "Xia-prefers-fractions-quokka", "Yuri-struggles-with-vectors-narwhal", "Zoe-loves-cells-axolotl"
X_SAID, Y_SAID = "Xia asked about halves (ocelot)", "Yuri asked about arrows (pangolin)"


async def seed(gateway) -> dict[str, str]:
    """Three learners with notes and a conversation each; their person ids by name."""
    controls, log_ = gateway.memory_controls, gateway.brain.files.log
    made = {}
    for name, teacher, first, second, note, said, partner in (
        ("xia", ADA_ID, "telegram:default:501", "webchat:default:xia-web", X_NOTE, X_SAID, "algebra"),
        ("yuri", ADA_ID, "telegram:default:502", "matrix:default:@yuri:school.example", Y_NOTE, Y_SAID, "algebra"),
        ("zoe", BEN_ID, "telegram:default:503", "webchat:default:zoe-web", Z_NOTE, "Zoe asked about cells", "biology"),
    ):
        person = (await controls.link(teacher, Identity.parse(first), Identity.parse(second))).person
        await controls.edit(learner_scope(teacher, person), f"# Notes\n\n{note}\n")
        await log_.append(person_history_key(person, partner), UserSaid(turn="t1", event_id="e1", sender=name.title(), text=said),
                          AssistantSaid(turn="t1", text=f"An answer for {name}"))
        made[name] = person
    await gateway.brain.files.usage.record("algebra", f"person:{made['xia']}", Usage(prompt_tokens=300, completion_tokens=45))
    return made


@pytest.fixture
async def served(tmp_path: Path):
    async with serve_console(tmp_path / "data", own_brain=True) as running:
        running.people = await seed(running.gateway)  # type: ignore[attr-defined]
        yield running


async def test_a_teacher_sees_only_the_learners_of_their_own_partners(served):
    xia, zoe = served.people["xia"], served.people["zoe"]
    async with aclosing(await signed_in(served.url, "ada")) as ada, aclosing(await signed_in(served.url, "ben")) as ben:
        listed = (await ada.get("/console/api/partners/algebra/learners")).json()["learners"]
        assert {learner["id"] for learner in listed} == {xia, served.people["yuri"]}
        page = (await ada.get("/console/partners/algebra/learners")).text
        assert f'data-learner="{xia}"' in page and f'data-learner="{zoe}"' not in page
        assert [learner["id"] for learner in (await ben.get("/console/api/partners/biology/learners")).json()["learners"]] == [zoe]

        csrf = await csrf_of(ben)
        for partner in ("algebra", "biology", "geometry"):  # Ada's learner under her partner's URL and under Ben's own
            base = f"/console/partners/{partner}/learners/{xia}"
            assert (await ben.get(base)).status_code == 404
            assert (await ben.get(base + "/export")).status_code == 404
            assert (await ben.get(f"/console/api/partners/{partner}/learners/{xia}")).status_code == 404
            assert (await ben.post(base + "/forget", data={"csrf": csrf, "confirm": xia})).status_code == 404
            assert (await ben.post(base + "/notes", data={"csrf": csrf, "markdown": "overwritten"})).status_code == 404
        assert (await ben.get("/console/partners/algebra/learners")).status_code == 404
        assert (await ada.get(f"/console/partners/algebra/learners/{zoe}")).status_code == 404  # and the other way round
        still = await ada.get(f"/console/partners/algebra/learners/{xia}")
        assert still.status_code == 200 and X_NOTE in still.text and "overwritten" not in still.text


async def test_one_learners_page_shows_none_of_anothers_memory(served):
    xia = served.people["xia"]
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        page = (await ada.get(f"/console/partners/algebra/learners/{xia}")).text
        exported = (await ada.get(f"/console/partners/algebra/learners/{xia}/export")).text
        api = (await ada.get(f"/console/api/partners/algebra/learners/{xia}")).text
    for shown in (page, exported, api):
        assert X_NOTE in shown and X_SAID in shown
        assert Y_NOTE not in shown and Y_SAID not in shown and Z_NOTE not in shown
        assert "502" not in shown and "@yuri" not in shown  # nor Yuri's accounts
    assert "telegram:default:501" in page and "webchat:default:xia-web" in page  # both of Xia's linked accounts
    assert "345 tokens today" in page  # her usage from the ledger


async def test_notes_are_edited_from_the_form_and_the_api_and_exported_as_a_download(served):
    xia = served.people["xia"]
    base = f"/console/partners/algebra/learners/{xia}"
    api_path = f"/console/api/partners/algebra/learners/{xia}"
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        csrf = await csrf_of(ada)
        assert (await ada.post(base + "/notes", data={"markdown": "no token"})).status_code == 403
        saved = await ada.post(base + "/notes", data={"csrf": csrf, "markdown": "# Notes\n\nNow works with thirds (tapir)\n"})
        assert saved.status_code == 303 and saved.headers["location"] == base + "?saved=1"
        page = (await ada.get(saved.headers["location"])).text
        assert "The notes are saved." in page and "thirds (tapir)" in page and X_NOTE not in page

        download = await ada.get(base + "/export")
        assert download.status_code == 200
        assert download.headers["content-disposition"] == f'attachment; filename="memory-algebra-{xia}.json"'
        kept = json.loads(download.text)
        assert kept["document"]["markdown"].strip().endswith("thirds (tapir)")
        assert kept["document"]["author"] == "teacher"
        assert {a["identity"] for a in kept["accounts"]} == {"telegram:default:501", "webchat:default:xia-web"}
        assert list(kept["history"]) == [person_history_key(xia, "algebra")]

        put = await ada.put(api_path, json={"markdown": "From the API (wombat)"}, headers={"X-CSRF-Token": csrf})
        assert put.status_code == 200 and put.json() == {"saved": True}
        assert (await ada.put(api_path, json={"text": 1}, headers={"X-CSRF-Token": csrf})).status_code == 400
        assert (await ada.put(api_path, json={"markdown": "x"})).status_code == 403
        again = (await ada.get(api_path)).json()
        assert again["memory"]["document"]["markdown"] == "From the API (wombat)"
        assert again["usage_today"]["tokens"] == 345


async def test_an_edit_waits_for_the_learners_running_turn_and_changes_nothing_when_it_does_not_end(served):
    xia = served.people["xia"]
    controls = served.gateway.memory_controls
    controls.wait_s = 0.2  # the turn below never ends; the real wait is a model call's deadline
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        csrf = await csrf_of(ada)
        async with controls.locks.hold(person_lock_key(xia), timeout=5):  # what a running turn holds
            refused = await ada.post(f"/console/partners/algebra/learners/{xia}/notes", data={"csrf": csrf, "markdown": "lost"})
            assert refused.status_code == 409 and "talking to a partner right now" in refused.text
            assert "lost" in refused.text  # the draft is kept in the form
            api = await ada.put(f"/console/api/partners/algebra/learners/{xia}", json={"markdown": "lost"}, headers={"X-CSRF-Token": csrf})
            assert api.status_code == 409 and api.headers["retry-after"] == "5"
            forget = await ada.post(f"/console/partners/algebra/learners/{xia}/forget", data={"csrf": csrf, "confirm": xia})
            assert forget.status_code == 409
        kept = await controls.export(learner_scope(ADA_ID, xia))
        assert X_NOTE in kept["document"]["markdown"]


async def test_forgetting_needs_the_confirmation_and_then_erases_the_learner(served):
    xia, yuri = served.people["xia"], served.people["yuri"]
    base = f"/console/partners/algebra/learners/{xia}"
    api_path = f"/console/api/partners/algebra/learners/{xia}"
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        csrf = await csrf_of(ada)
        confirm = await ada.get(base + "/forget")
        assert confirm.status_code == 200 and "cannot be undone" in confirm.text and 'name="confirm"' in confirm.text
        unconfirmed = await ada.post(base + "/forget", data={"csrf": csrf})
        assert unconfirmed.status_code == 400 and "nothing was erased" in unconfirmed.text
        wrong = await ada.post(base + "/forget", data={"csrf": csrf, "confirm": yuri})  # another learner's box
        assert wrong.status_code == 400
        api = await ada.delete(api_path, headers={"X-CSRF-Token": csrf})
        assert api.status_code == 400 and f"?confirm={xia}" in api.json()["error"]
        assert (await ada.get(base)).status_code == 200  # still there

        done = await ada.post(base + "/forget", data={"csrf": csrf, "confirm": xia})
        assert done.status_code == 303 and done.headers["location"] == "/console/partners/algebra/learners?forgotten=1"
        listing = (await ada.get(done.headers["location"])).text
        assert "The learner is forgotten." in listing and f'data-learner="{xia}"' not in listing
        assert f'data-learner="{yuri}"' in listing
        assert (await ada.get(base)).status_code == 404

        gone = await ada.delete(f"/console/api/partners/algebra/learners/{yuri}?confirm={yuri}", headers={"X-CSRF-Token": csrf})
        assert gone.status_code == 200 and gone.json() == {"forgotten": yuri}
    controls, log_ = served.gateway.memory_controls, served.gateway.brain.files.log
    assert {p.id for p in await controls.people()} == {served.people["zoe"]}
    assert await log_.keys(f"person:{xia}:") == []
    assert await served.gateway.brain.files.usage.spent_today("algebra", f"person:{xia}") == 0


async def test_a_co_owner_sees_the_learners_chats_with_the_partners_they_own_only(tmp_path: Path):
    """Ben co-owns Ada's ``shared``; Ada alone owns ``private``: both share Ada's teacher scope and so the learner."""
    from brain.factory import build_controls
    from gateway.configfile import parse_config
    from gateway.console.access import Viewer
    from gateway.console.learners import Learners
    from gateway.console.pages import Console
    from gateway.store.console import Role
    from tests.console.rig import user

    ada = {"channel": "telegram", "user": "100"}
    config = parse_config({"data_dir": str(tmp_path / "data"), "partners": [
        {"id": "shared", "name": "Shared", "owners": [ada, {"channel": "matrix", "user": "@ben:school.example"}]},
        {"id": "private", "name": "Private", "owners": [ada]},
    ]})
    built = build_controls(config)  # the CLI's wiring of the same controls, on this data dir
    try:
        person = (await built.memory.link(ADA_ID, Identity.parse("telegram:default:601"), Identity.parse("webchat:default:w601"))).person
        await built.memory.edit(learner_scope(ADA_ID, person), "Notes both partners read (lemur)")
        for partner in ("shared", "private"):
            await built.files.log.append(person_history_key(person, partner),
                                         UserSaid(turn="t", event_id="e", sender="Lin", text=f"said to {partner}"))

        running_config = config

        class Running:
            memory_controls = built.memory
            config = running_config  # the console reads the running gateway's config (ADR 0039)

        learners = Learners(Console(config, store=None, gateway=Running()))  # type: ignore[arg-type]
        [found] = await learners.learners(built.memory, config.partner("shared"))
        ben = Viewer.of(user("ben", Role.TEACHER, BEN_ID))
        kept = await learners.memory(built.memory, ben, config.partner("shared"), found)
        assert list(kept["history"]) == [person_history_key(person, "shared")]
        assert "lemur" in kept["document"]["markdown"]  # what the shared partner's own turns read
        assert "said to private" not in json.dumps(kept)
        assert ben.partner(config, "private") is None  # and the private partner's URLs are 404 to him
        root = Viewer.of(user("root", Role.ADMINISTRATOR))
        everything = await learners.memory(built.memory, root, config.partner("shared"), found)
        assert set(everything["history"]) == {person_history_key(person, p) for p in ("shared", "private")}
    finally:
        await built.close()
