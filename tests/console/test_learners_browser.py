"""Learners and Knowledge in headless Chromium: a memory exported as a download and forgotten, a document uploaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser import TIMEOUT_MS, signed_in_tab
from tests.console.rig import PASSWORDS, serve_console
from tests.console.test_knowledge import WORKSHEET
from tests.console.test_learners import X_NOTE, X_SAID, Y_NOTE, seed

pytestmark = pytest.mark.browser


async def test_a_teacher_exports_a_learners_memory_and_forgets_them(tmp_path: Path, browser):
    async with serve_console(tmp_path / "data", own_brain=True) as running:
        people = await seed(running.gateway)
        xia = people["xia"]
        tab = await signed_in_tab(browser, running.url, "ada", PASSWORDS["ada"], accept_downloads=True)
        page, errors = tab.page, tab.errors

        await page.click('#partners tr[data-partner="algebra"] >> text=Learners')
        await page.wait_for_url("**/console/partners/algebra/learners", timeout=TIMEOUT_MS)
        assert await page.locator("#learners tbody tr").count() == 2
        await page.click(f'#learners tr[data-learner="{xia}"] a')
        await page.wait_for_url(f"**/learners/{xia}", timeout=TIMEOUT_MS)
        assert X_NOTE in await page.locator("#notes").input_value()
        assert X_SAID in await page.locator("main").inner_text()
        assert Y_NOTE not in await page.content()

        async with page.expect_download(timeout=TIMEOUT_MS) as waiting:
            await page.click("#export")
        download = await waiting.value
        assert download.suggested_filename == f"memory-algebra-{xia}.json"
        kept = json.loads(Path(await download.path()).read_text(encoding="utf-8"))
        assert X_NOTE in kept["document"]["markdown"] and Y_NOTE not in json.dumps(kept)

        await page.click("#forget")
        await page.wait_for_url(f"**/learners/{xia}/forget", timeout=TIMEOUT_MS)
        assert "cannot be undone" in await page.locator("main").inner_text()
        await page.click("#forget-confirm")  # the box is not ticked: the browser's own check stops the form
        assert page.url.endswith("/forget")
        await page.check("#confirm")
        await page.click("#forget-confirm")
        await page.wait_for_url("**/console/partners/algebra/learners?forgotten=1", timeout=TIMEOUT_MS)
        assert "The learner is forgotten." in await page.locator(".notice").inner_text()
        assert await page.locator(f'#learners tr[data-learner="{xia}"]').count() == 0
        assert await page.locator("#learners tbody tr").count() == 1
        assert errors == []
        await tab.close()
        assert xia not in {person.id for person in await running.gateway.memory_controls.people()}


async def test_a_teacher_uploads_a_document_and_reads_its_passages(tmp_path: Path, browser):
    upload = tmp_path / "Fractions Worksheet.md"
    upload.write_bytes(WORKSHEET)
    bad = tmp_path / "slides.pptx"
    bad.write_bytes(b"not a document it reads")
    async with serve_console(tmp_path / "data", own_brain=True) as running:
        tab = await signed_in_tab(browser, running.url, "ada", PASSWORDS["ada"], accept_downloads=True)
        page, errors = tab.page, tab.errors
        page.on("console", lambda message: errors.append(message.text) if "Refused" in message.text else None)  # CSP refusals
        sent_by: list[str] = []
        page.on("request", lambda request: sent_by.append(request.resource_type) if request.method == "POST" else None)
        await page.goto(running.url + "/console/partners/algebra/knowledge", timeout=TIMEOUT_MS)
        assert await page.locator("h1").inner_text() == "Knowledge of Algebra"
        await page.set_input_files("#file", str(upload))
        await page.click("#upload")
        await page.wait_for_url("**/knowledge?added=fractions-worksheet.md", timeout=TIMEOUT_MS)
        assert "fractions-worksheet.md is added." in await page.locator(".notice").inner_text()
        assert sent_by == ["xhr"]  # the committed script sent it, for its progress bar
        row = page.locator('#documents tr[data-document="fractions-worksheet.md"]')
        assert "2" in await row.inner_text()

        await page.fill("#q", "numerator")
        await page.click("#search")
        await page.wait_for_url("**/knowledge?q=numerator", timeout=TIMEOUT_MS)
        assert await page.locator("#results cite").first.inner_text() == "Fractions Worksheet.md"

        await page.click('#documents tr[data-document="fractions-worksheet.md"] a')
        await page.wait_for_url("**/knowledge/fractions-worksheet.md", timeout=TIMEOUT_MS)
        assert await page.locator("#passages li").count() == 2
        assert "zebrafish" in await page.locator("#passages").inner_text()
        await page.go_back()
        await page.go_back()  # the knowledge page again: a file it cannot read is refused, the answer shown in place
        await page.set_input_files("#file", str(bad))
        await page.click("#upload")
        await page.locator("#upload-error").wait_for(timeout=TIMEOUT_MS)
        assert ".pptx" in await page.locator("#upload-error").inner_text()
        await page.goto(running.url + "/console/partners/algebra/knowledge/fractions-worksheet.md", timeout=TIMEOUT_MS)
        await page.click("#delete")
        await page.wait_for_url("**/knowledge?removed=fractions-worksheet.md", timeout=TIMEOUT_MS)
        assert await page.locator("#documents").count() == 0
        assert errors == []
        await tab.close()
