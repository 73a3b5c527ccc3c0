"""Pairing in headless Chromium: two learners wait on the relay platform; the teacher approves one in the
browser and that learner's held message is answered on the platform, then denies the other, who hears nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.browser import TIMEOUT_MS, signed_in_tab
from tests.console.conversation_rig import classroom
from tests.console.rig import PASSWORDS
from tests.contract.harness import eventually

pytestmark = pytest.mark.browser


async def test_a_teacher_approves_a_waiting_learner_who_is_then_answered_and_denies_another(
        relay_peer, tmp_path: Path, monkeypatch, browser):
    async with classroom(relay_peer, tmp_path / "data", monkeypatch, dm="pairing") as room:
        await room.say("ada-kid", "Hello, can we start?")
        await room.say("other-kid", "Me too")

        async def two_waiting() -> bool:
            return len(await room.gateway.store.pairing_list()) == 2

        await eventually(two_waiting, what="both learners' pairing codes")
        tab = await signed_in_tab(browser, room.url, "ada", PASSWORDS["ada"])
        page = tab.page
        await page.click('header a[href="/console/pairing"]')
        await page.wait_for_url(room.url + "/console/pairing", timeout=TIMEOUT_MS)
        assert await page.locator("h1").inner_text() == "Learners waiting for approval"
        rows = page.locator("#pairing tbody tr")
        assert await rows.count() == 2
        assert {await rows.nth(i).get_attribute("data-partner") for i in range(2)} == {"algebra"}
        assert not any(text.startswith("Echo:") for text in await room.seen_by("ada-kid"))  # held until approved

        await page.locator("#pairing tr", has_text="ada-kid").locator("button.approve").click()
        await page.wait_for_url("**/console/pairing?done=approve", timeout=TIMEOUT_MS)
        assert "Approved" in await page.locator(".notice").inner_text()
        assert await rows.count() == 1 and "other-kid" in await rows.first.inner_text()
        await room.sees("ada-kid", "Echo: Hello, can we start?", what="the held message answered after the approval")
        await room.say("ada-kid", "Next question")
        await room.sees("ada-kid", "Echo: Next question", what="the approved learner answered from now on")

        await page.locator("#pairing tr", has_text="other-kid").locator("button.deny").click()
        await page.wait_for_url("**/console/pairing?done=deny", timeout=TIMEOUT_MS)
        assert "Denied" in await page.locator(".notice").inner_text()
        assert await page.locator("#pairing").count() == 0
        assert await page.locator("main .empty").inner_text() == "No learner is waiting for approval."
        assert not await room.gateway.store.is_approved("relay", "main", "other-kid")
        await asyncio.sleep(0.5)  # an answer that must not come: short, it is this test's own business
        assert not any(text.startswith("Echo:") for text in await room.seen_by("other-kid"))
        assert tab.errors == []
        assert all(url.startswith(room.url + "/") for url in tab.requested), tab.requested  # nothing from a CDN
        await tab.close()
