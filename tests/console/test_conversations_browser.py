"""The takeover round trip in headless Chromium: a teacher opens a learner's conversation, watches it update,
takes it over, answers, and hands it back -- and the learner, on the relay platform, gets both."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.core.phrases import ENGLISH, Phrase, say
from tests.browser import TIMEOUT_MS, new_tab, sign_in
from tests.console.conversation_rig import classroom, ref
from tests.console.rig import PASSWORDS

pytestmark = pytest.mark.browser


async def test_a_teacher_takes_over_answers_and_hands_back_in_the_browser(relay_peer, tmp_path: Path, monkeypatch, browser):
    async with classroom(relay_peer, tmp_path / "data", monkeypatch) as room:
        await room.say("ada-kid", "I am stuck on fractions")
        await room.sees("ada-kid", "Echo: I am stuck on fractions")
        tab = await new_tab(browser)
        page, errors = tab.page, tab.errors

        def console_error(message) -> None:  # a CSP refusal or a failed fetch of the script shows here
            if message.type == "error" and not message.location.get("url", "").endswith("/favicon.ico"):  # the browser's own ask
                errors.append(f"{message.text} {message.location}")

        page.on("console", console_error)
        missing: list[str] = []
        page.on("response", lambda response: missing.append(response.url) if response.status == 404 else None)

        await sign_in(page, room.url, "ada", PASSWORDS["ada"])
        await page.click("text=Conversations")
        await page.wait_for_url(room.url + "/console/conversations", timeout=TIMEOUT_MS)
        row = page.locator(f'tr[data-conversation="{ref("ada-kid")}"]')
        assert "Answered" in await row.inner_text()
        await row.locator("a").click()
        await page.wait_for_url(f"**/console/conversations/{ref('ada-kid')}", timeout=TIMEOUT_MS)
        assert "I am stuck on fractions" in await page.locator("#transcript").inner_text()

        await page.click("#take-over")
        await page.wait_for_url("**?done=takeover", timeout=TIMEOUT_MS)
        assert "Taken over by a teacher" in await page.locator("#state").inner_text()

        # The learner writes while the page is open: the committed script shows it without a reload.
        await room.say("ada-kid", "Is 3/4 bigger than 2/3?")
        await page.locator("#transcript li.heard", has_text="Is 3/4 bigger than 2/3?").wait_for(timeout=TIMEOUT_MS)

        answer = "Yes: 3/4 is 9/12 and 2/3 is 8/12."
        await page.fill("#answer", answer)
        await page.click("#send-answer")
        await page.wait_for_url("**?done=reply", timeout=TIMEOUT_MS)
        await room.sees("ada-kid", answer, what="the teacher's answer from the browser on the platform")
        await page.locator("#transcript li.said", has_text=answer).wait_for(timeout=TIMEOUT_MS)

        await page.click("#hand-back")
        await page.wait_for_url("**?done=handback", timeout=TIMEOUT_MS)
        seen = await room.sees("ada-kid", say(Phrase.HANDED_BACK, ENGLISH, partner="Algebra"), what="the hand-back phrase")
        assert "Echo: Is 3/4 bigger than 2/3?" not in seen
        assert await page.locator("#take-over").count() == 1  # the partner has it again
        assert missing == [] and errors == [], (missing, errors)  # no CSP refusal, no script error, nothing missing
        await tab.close()
