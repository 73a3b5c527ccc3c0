"""The dashboard in headless Chromium after a few web chat exchanges with the real brain: the totals, the
three charts drawn from them, the table by account, the model's tokens and cost, and the week view."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from pathlib import Path

import pytest

from gateway.store.console import Role
from tests.browser import TIMEOUT_MS, signed_in_tab
from tests.console.brain_rig import brain_console
from tests.console.rig import PASSWORDS, signed_in, user
from tests.e2e.rig import PARTNER, WebLearner
from tests.peers.model_stub import ModelStub, Reply
from tests.waits import HANG_S

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("real_brain"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")]

QUESTIONS = ["What is a half of 8?", "And a quarter of 8?", "And three quarters?"]
USAGE = {"prompt_tokens": 30, "completion_tokens": 5}


async def test_the_dashboard_draws_a_few_exchanges(tmp_path: Path, browser):
    async with ModelStub() as stub:
        stub.script(*[Reply.text(f"Answer {n}.", usage=USAGE) for n in range(len(QUESTIONS))])
        async with brain_console(tmp_path / "data", stub.api_base, user("ada", Role.TEACHER, "telegram:100"),
                                 model={"input_cost_per_token": 0.001, "output_cost_per_token": 0.002}) as running:
            learner = await WebLearner(running.url).open()
            try:
                for n, question in enumerate(QUESTIONS, start=1):
                    await learner.say(question)
                    await learner.wait_for(lambda page, n=n: len(page.finished()) >= n, what=f"answer {n}")
            finally:
                await learner.close()
            async with aclosing(await signed_in(running.url, "ada")) as ada, asyncio.timeout(HANG_S):
                while True:  # the counts are flushed, latency last, and the ledger has the turns
                    day = (await ada.get("/console/api/dashboard")).json()
                    if day["totals"]["messages_in"] == len(QUESTIONS) and day["totals"]["latency_p50_s"] is not None \
                            and day["models"]:
                        break
                    await asyncio.sleep(0.05)

            tab = await signed_in_tab(browser, running.url, "ada", PASSWORDS["ada"])
            page = tab.page
            await page.goto(running.url + "/console/dashboard", timeout=TIMEOUT_MS)
            assert await page.locator("h1").inner_text() == "Dashboard"
            totals = day["totals"]
            assert await page.locator('[data-total="in"]').inner_text() == "3"
            assert await page.locator('[data-total="out"]').inner_text() == str(totals["messages_out"])
            assert totals["messages_out"] >= len(QUESTIONS)  # every question answered (a greeting may add one)
            assert (await page.locator('[data-total="p50"]').inner_text()).endswith(" s")
            assert await page.locator('[data-total="drops"]').inner_text() == "0"
            assert await page.locator("figure.chart svg").count() == 3

            drawn_in = await page.eval_on_selector_all("#chart-messages rect.bar.in", "bars => bars.map(b => +b.dataset.value)")
            drawn_out = await page.eval_on_selector_all("#chart-messages rect.bar.out", "bars => bars.map(b => +b.dataset.value)")
            assert len(drawn_in) == 24 and sum(drawn_in) == 3  # a bar an hour, the exchanges in the last one or two
            assert sum(drawn_out) == totals["messages_out"]
            heights = await page.eval_on_selector_all("#chart-messages rect.bar.in", "bars => bars.map(b => +b.getAttribute('height'))")
            assert max(heights) > 0
            latency = await page.eval_on_selector_all("#chart-latency rect.bar.p50", "bars => bars.map(b => +b.dataset.value)")
            assert any(value > 0 for value in latency)
            box = await page.locator("#chart-messages svg").bounding_box()
            assert box is not None and box["width"] > 100  # drawn, not collapsed

            row = page.locator(f'#by-account tr[data-row="{PARTNER}/webchat:default"]')
            cells = await row.locator("td").all_inner_texts()
            assert cells[2] == "3" and cells[3] == str(totals["messages_out"])
            model = await page.locator(f'#models tr[data-partner="{PARTNER}"] td').all_inner_texts()
            assert model[1] == str(len(QUESTIONS) * 35)  # tokens, as the stub reported them
            assert model[2] == "%.4f" % (len(QUESTIONS) * (30 * 0.001 + 5 * 0.002))
            assert model[3] == "3"

            await page.click("#span-week")
            await page.wait_for_url("**/console/dashboard?span=week", timeout=TIMEOUT_MS)
            assert await page.locator("#chart-messages text.tick").count() == 7
            week = await page.eval_on_selector_all("#chart-messages rect.bar.in", "bars => bars.map(b => +b.dataset.value)")
            assert len(week) == 7 and sum(week) == 3  # a bar a day
            assert tab.errors == []
            assert all(url.startswith(running.url + "/") for url in tab.requested), tab.requested  # nothing from a CDN
            await tab.close()
