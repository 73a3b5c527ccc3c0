"""Knowledge in headless Chromium, end to end with the real brain: a teacher uploads a document (the
progress bar shows while it is sent and indexed), reads its passages, searches it as the partner would;
a learner on the web chat page then asks and gets the answer built from it, cited; and the teacher finds
that conversation on the learner's page."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.store.console import Role
from tests.browser import TIMEOUT_MS, new_tab, signed_in_tab
from tests.console.brain_rig import brain_console
from tests.console.rig import ADA_ID, PASSWORDS, user
from tests.console.test_knowledge import WORKSHEET
from tests.console.test_knowledge_cited import ANSWER, QUESTION
from tests.e2e.rig import PARTNER
from tests.peers.model_stub import ModelStub, Reply
from tests.waits import HANG_S

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("real_brain"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")]

DOC = "fractions-worksheet.md"


async def test_an_upload_in_the_browser_is_what_the_learner_is_answered_from(tmp_path: Path, browser):
    upload = tmp_path / "Fractions Worksheet.md"
    upload.write_bytes(WORKSHEET)
    async with ModelStub() as stub:
        async with brain_console(tmp_path / "data", stub.api_base, user("ada", Role.TEACHER, ADA_ID)) as running:
            teacher = await signed_in_tab(browser, running.url, "ada", PASSWORDS["ada"])
            page = teacher.page
            base = f"/console/partners/{PARTNER}/knowledge"
            await page.goto(running.url + base, timeout=TIMEOUT_MS)
            assert await page.locator("#upload-progress").is_hidden()

            seen = asyncio.Event()

            async def held(route) -> None:  # the upload's answer waits until the test has seen the bar
                if route.request.method == "POST":
                    assert route.request.resource_type == "xhr"  # the committed script sent it
                    await asyncio.wait_for(seen.wait(), HANG_S)
                await route.continue_()

            await page.route(f"**{base}", held)
            await page.set_input_files("#file", str(upload))
            await page.click("#upload")
            await page.locator("#upload-progress").wait_for(state="visible", timeout=TIMEOUT_MS)
            assert await page.locator("#upload-status").inner_text() in ("Sending the file…", "Sent. Indexing the passages…")
            seen.set()
            await page.wait_for_url(f"**{base}?added={DOC}", timeout=TIMEOUT_MS)
            await page.unroute(f"**{base}")
            assert f"{DOC} is added." in await page.locator(".notice").inner_text()
            assert await page.locator("#upload-progress").is_hidden()  # a new page: the bar is gone

            await page.click(f'#documents tr[data-document="{DOC}"] a')
            await page.wait_for_url(f"**{base}/{DOC}", timeout=TIMEOUT_MS)
            passages = page.locator("#passages li")
            assert await passages.count() == 2
            assert "zebrafish" in await passages.first.inner_text()
            assert "Fractions Worksheet.md" in await passages.first.locator("cite").inner_text()
            await page.go_back()
            await page.fill("#q", "numerator")
            await page.click("#search")
            await page.wait_for_url(f"**{base}?q=numerator", timeout=TIMEOUT_MS)
            assert await page.locator("#results cite").first.inner_text() == "Fractions Worksheet.md"
            assert "zebrafish" in await page.locator("#results li").first.inner_text()

            # a learner asks on the web chat page; the model searches and answers citing the passage
            stub.script(Reply.tool_calls(("knowledge_search", {"query": "numerator"})), Reply.text(ANSWER))
            learner = await new_tab(browser)
            chat = learner.page
            await chat.goto(running.url + "/channels/webchat/default/", timeout=TIMEOUT_MS)
            await chat.locator(".bubble.partner").first.wait_for(timeout=TIMEOUT_MS)  # greeted: the session is open
            await chat.fill("#text", QUESTION)
            await chat.press("#text", "Enter")
            answer = chat.locator(".bubble.partner:not(.streaming)", has_text="It counts the parts you take")
            await answer.wait_for(timeout=TIMEOUT_MS)
            assert "[1]" in await answer.inner_text()
            [result] = [m["content"] for m in stub.requests[-1]["messages"] if m["role"] == "tool"]
            assert result.startswith("[1] Fractions worksheet — Halves (Fractions Worksheet.md)\n"), result[:200]
            assert "zebrafish" in result.split("\n\n[2]")[0]

            # and the teacher finds the learner, and this conversation, on the Learners page
            await page.goto(running.url + f"/console/partners/{PARTNER}/learners", timeout=TIMEOUT_MS)
            assert await page.locator("#learners tbody tr").count() == 1
            await page.click("#learners tbody tr a")
            await page.wait_for_url(f"**/console/partners/{PARTNER}/learners/*", timeout=TIMEOUT_MS)
            shown = await page.locator("main").inner_text()
            assert QUESTION in shown and ANSWER in shown
            assert teacher.errors == [] and learner.errors == []
            assert all(url.startswith(running.url + "/") for url in teacher.requested + learner.requested)  # no CDN
            await learner.close()
            await teacher.close()
