"""The persona editor over real HTTP: persona.yaml and SOUL.md checked as the loader checks them, written atomically.

A shipped persona is copied into the user's ``personas/`` folder beside the config file on its first
edit, so the packaged files never change; the loader then finds the copy first.
"""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

import pytest

from personas.loader import PACKAGED_DIR, load_persona, persona_dirs
from tests.console.partners_rig import serve_file, write_config
from tests.console.rig import csrf_of, hidden, signed_in

SOUL = "You are a patient algebra tutor who asks one question at a time (marmoset)."


@pytest.fixture
async def served(tmp_path: Path):
    path = write_config(tmp_path)
    async with serve_file(path) as running:
        yield running, path


async def test_a_shipped_persona_is_copied_beside_the_config_and_edited_there(served):
    running, path = served
    shipped = (PACKAGED_DIR / "study-buddy" / "SOUL.md").read_bytes()
    async with aclosing(await signed_in(running.url, "root")) as root:
        page = await root.get("/console/personas/study-buddy")
        assert page.status_code == 200 and 'id="persona-spec"' in page.text
        spec = (PACKAGED_DIR / "study-buddy" / "persona.yaml").read_text(encoding="utf-8").replace(
            "name: Study Buddy", "name: Study Buddy Plus")
        saved = await root.post("/console/personas/study-buddy", files={"_": ("", b"")}, data={
            "csrf": hidden(page.text, "csrf"), "version": hidden(page.text, "version"), "spec": spec, "soul": SOUL})
        assert saved.status_code == 303, saved.text
    copy = path.parent / "personas" / "study-buddy"
    assert (copy / "SOUL.md").read_text(encoding="utf-8") == SOUL
    assert "# Study Buddy: the default partner." in (copy / "persona.yaml").read_text(encoding="utf-8")  # comments kept
    assert (copy / "notes").is_dir()  # its notes came along, so knowledge: [notes/] still loads
    assert (PACKAGED_DIR / "study-buddy" / "SOUL.md").read_bytes() == shipped
    loaded = load_persona("study-buddy", persona_dirs(running.gateway.config))
    assert loaded.name == "Study Buddy Plus" and loaded.soul == SOUL


@pytest.mark.parametrize(("spec", "soul", "words"), [
    ("name: X\ntools: [knowledge_search, knowledge_search]\n", SOUL, "persona.yaml:tools: listed more than once: knowledge_search"),
    ("name: X\nsoul: inline\n", SOUL, "persona.yaml:soul: not a persona.yaml field"),
    ("name: [unclosed\n", SOUL, "not valid YAML"),
    ("name: X\n", "   \n", "SOUL.md: is empty"),
    ("name: X\nknowledge: [missing/]\n", SOUL, "'missing/' does not exist"),
    ("name: X\n", "x" * (33 * 1024), "SOUL.md: is 33 KiB; the limit is 32 KiB"),
])
async def test_a_persona_that_would_not_load_is_refused_with_the_loaders_own_error(served, spec, soul, words):
    running, path = served
    async with aclosing(await signed_in(running.url, "root")) as root:
        current = (await root.get("/console/api/personas/socratic-math")).json()
        answer = await root.put("/console/api/personas/socratic-math", headers={"x-csrf-token": await csrf_of(root)},
                                json={"spec": spec, "soul": soul, "version": current["version"]})
        assert answer.status_code == 400, answer.text
        assert words in answer.json()["error"], answer.json()
    assert not (path.parent / "personas" / "socratic-math").exists()  # nothing written, no copy left behind


async def test_a_stale_persona_page_is_refused_and_a_shared_persona_is_the_administrators(served):
    running, path = served
    async with aclosing(await signed_in(running.url, "root")) as root:
        token = await csrf_of(root)
        current = (await root.get("/console/api/personas/study-buddy")).json()
        first = await root.put("/console/api/personas/study-buddy", headers={"x-csrf-token": token},
                               json={**current, "soul": SOUL})
        assert first.status_code == 200, first.text
        again = await root.put("/console/api/personas/study-buddy", headers={"x-csrf-token": token},
                               json={**current, "soul": "an edit on the old page"})
        assert again.status_code == 409 and "changed since this page was loaded" in again.json()["error"]
    assert (path.parent / "personas" / "study-buddy" / "SOUL.md").read_text(encoding="utf-8") == SOUL
    async with aclosing(await signed_in(running.url, "ada")) as ada:
        # study-buddy speaks for Ben's biology too: Ada may read it, not change it
        current = (await ada.get("/console/api/personas/study-buddy")).json()
        refused = await ada.put("/console/api/personas/study-buddy", headers={"x-csrf-token": await csrf_of(ada)},
                                json={**current, "soul": "Ada's voice"})
        assert refused.status_code == 403
        assert (await ada.get("/console/api/personas/socratic-math")).status_code == 404  # none of hers uses it


async def test_the_console_shows_exactly_the_error_the_file_would_get(served):
    import shutil

    from gateway.core.errors import ConfigError

    running, path = served
    spec = "name: X\ntools: [knowledge_search]\npolicies:\n  max_round: 3\n"
    async with aclosing(await signed_in(running.url, "root")) as root:
        current = (await root.get("/console/api/personas/socratic-math")).json()
        answer = await root.put("/console/api/personas/socratic-math", headers={"x-csrf-token": await csrf_of(root)},
                                json={"spec": spec, "soul": SOUL, "version": current["version"]})
    by_hand = path.parent / "personas" / "socratic-math"
    shutil.copytree(PACKAGED_DIR / "socratic-math", by_hand)
    (by_hand / "persona.yaml").write_text(spec, encoding="utf-8")
    (by_hand / "SOUL.md").write_text(SOUL, encoding="utf-8")
    with pytest.raises(ConfigError) as loaded:
        load_persona("socratic-math", persona_dirs(running.gateway.config))
    assert answer.status_code == 400 and answer.json()["error"] == str(loaded.value)
