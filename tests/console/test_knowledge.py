"""The Knowledge area over real HTTP: a document uploaded as a browser's form sends it, read back, found, deleted.

The gateway runs its own brain, so the upload goes to the knowledge service its turns search
(the fts engine, nothing to configure); a search here is the partner's ``knowledge_search``.
"""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

import pytest

from tests.console.rig import csrf_of, serve_console, signed_in

WORKSHEET = (b"# Fractions worksheet\n\n## Halves\n\nA half of a pizza is one of two equal parts; the "
             b"numerator counts the parts you take (zebrafish).\n\n## Thirds\n\nThree equal parts make a whole.\n")


@pytest.fixture
async def served(tmp_path: Path):
    async with serve_console(tmp_path / "data", own_brain=True) as running:
        yield running


async def test_an_uploaded_document_shows_its_passages_is_found_by_search_and_is_deleted(served):
    base = "/console/partners/algebra/knowledge"
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        csrf = await csrf_of(ada)
        sent = await ada.post(base, data={"csrf": csrf}, files={"file": ("Fractions Worksheet.md", WORKSHEET, "text/markdown")})
        assert sent.status_code == 303 and sent.headers["location"] == f"{base}?added=fractions-worksheet.md"
        listing = (await ada.get(sent.headers["location"])).text
        assert "fractions-worksheet.md is added." in listing and 'data-document="fractions-worksheet.md"' in listing

        again = await ada.post(base, data={"csrf": csrf}, files={"file": ("Fractions Worksheet.md", WORKSHEET, "text/markdown")})
        assert again.headers["location"] == f"{base}?unchanged=fractions-worksheet.md"  # the same bytes: a no-op

        document = await ada.get("/console/api/partners/algebra/knowledge/fractions-worksheet.md")
        passages = document.json()["passages"]
        assert document.json()["document"]["passages"] == len(passages) == 2
        assert [p["section"] for p in passages] == ["Halves", "Thirds"]
        assert all(p["citation"] == "Fractions Worksheet.md" for p in passages)
        page = (await ada.get(f"{base}/fractions-worksheet.md")).text
        assert "zebrafish" in page and "Three equal parts" in page

        found = (await ada.get("/console/api/partners/algebra/knowledge/search", params={"q": "numerator pizza"})).json()
        assert found["passages"][0]["source"] == "Fractions Worksheet.md" and "zebrafish" in found["passages"][0]["text"]
        shown = (await ada.get(base, params={"q": "numerator pizza"})).text
        assert 'id="results"' in shown and "<cite>Fractions Worksheet.md</cite>" in shown
        # the partner searches the same service its turns use
        assert (await served.gateway.knowledge.search("algebra", "numerator", 3))[0].source == "Fractions Worksheet.md"

        assert (await ada.post(f"{base}/fractions-worksheet.md/delete")).status_code == 403  # no CSRF token
        removed = await ada.post(f"{base}/fractions-worksheet.md/delete", data={"csrf": csrf})
        assert removed.status_code == 303 and removed.headers["location"] == f"{base}?removed=fractions-worksheet.md"
        assert 'data-document="fractions-worksheet.md"' not in (await ada.get(base)).text
        assert (await ada.get("/console/api/partners/algebra/knowledge/search", params={"q": "zebrafish"})).json()["passages"] == []
        assert (await ada.get(f"{base}/fractions-worksheet.md")).status_code == 404


async def test_the_api_uploads_lists_and_deletes_and_refuses_bad_files(served):
    api = "/console/api/partners/algebra/knowledge"
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        csrf = await csrf_of(ada)
        headers = {"X-CSRF-Token": csrf}
        text = b"Vectors have size and direction (okapi)."
        made = await ada.post(api, headers=headers, files={"file": ("notes.txt", text, "text/plain")})
        assert made.status_code == 201 and made.json()["status"] == "added" and made.json()["document"]["id"] == "notes.txt"
        assert [d["id"] for d in (await ada.get(api)).json()["documents"]] == ["notes.txt"]

        bad = await ada.post(api, headers=headers, files={"file": ("slides.pptx", b"not really", "application/octet-stream")})
        assert bad.status_code == 400 and "pptx" in bad.json()["error"]
        page = await ada.post("/console/partners/algebra/knowledge", data={"csrf": csrf},
                              files={"file": ("slides.pptx", b"not really", "application/octet-stream")})
        assert page.status_code == 400 and "pptx" in page.text
        empty = await ada.post(api, headers=headers, data={"nothing": "here"}, files={"other": ("a.txt", b"x", "text/plain")})
        assert empty.status_code == 400
        sneaky = await ada.post(api, headers=headers, files={"file": ("../../etc/evil.md", b"# Evil\n\nwalrus", "text/markdown")})
        assert sneaky.json()["document"]["id"] == "evil.md"  # the name only, never a path
        assert (await ada.post(api, files={"file": ("x.txt", b"x", "text/plain")})).status_code == 403  # no CSRF token
        huge = await ada.post(api, headers=headers, files={"file": ("big.txt", b"word " * (1024 * 1024), "text/plain")})
        assert huge.status_code == 413 and "larger than" in huge.json()["error"]  # the app's body limit, 4 MiB
        assert "big.txt" not in {d["id"] for d in (await ada.get(api)).json()["documents"]}

        assert (await ada.delete(f"{api}/notes.txt", headers=headers)).json() == {"removed": "notes.txt"}
        assert (await ada.delete(f"{api}/notes.txt", headers=headers)).status_code == 404
        assert (await ada.get(f"{api}/search")).status_code == 400


async def test_a_teacher_reaches_no_other_teachers_knowledge(served):
    async with aclosing(await signed_in(served.url, "ada")) as ada:
        csrf = await csrf_of(ada)
        await ada.post("/console/api/partners/algebra/knowledge", headers={"X-CSRF-Token": csrf},
                       files={"file": ("secret.md", b"# Secret\n\nThe answer key (manatee).", "text/markdown")})
    async with aclosing(await signed_in(served.url, "ben")) as ben:
        csrf = await csrf_of(ben)
        for path in ("/console/partners/algebra/knowledge", "/console/partners/algebra/knowledge/secret.md",
                     "/console/api/partners/algebra/knowledge", "/console/api/partners/algebra/knowledge/secret.md",
                     "/console/api/partners/algebra/knowledge/search?q=manatee"):
            assert (await ben.get(path)).status_code == 404, path
        assert (await ben.post("/console/partners/algebra/knowledge/secret.md/delete", data={"csrf": csrf})).status_code == 404
        assert (await ben.post("/console/api/partners/algebra/knowledge", headers={"X-CSRF-Token": csrf},
                               files={"file": ("planted.md", b"# Planted", "text/markdown")})).status_code == 404
        assert (await ben.get("/console/api/partners/biology/knowledge/search", params={"q": "manatee"})).json()["passages"] == []
    assert [d.doc_id for d in await served.gateway.knowledge.documents("algebra")] == ["secret.md"]
