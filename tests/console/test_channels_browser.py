"""The channels page and the dashboard in headless Chromium: disable, enable, and the charts after a web chat exchange."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

import pytest

from tests.browser import TIMEOUT_MS, signed_in_tab
from tests.console.rig import PASSWORDS, signed_in
from tests.console.test_channels import answered, serve_channels, until_dropped

pytestmark = pytest.mark.browser


async def test_a_teacher_disables_and_enables_an_account_and_reads_the_dashboard(tmp_path: Path, browser):
    async with serve_channels(tmp_path / "data") as running:
        await answered(running.url, "algebra", "hello")
        async with aclosing(await signed_in(running.url, "ada")) as counted:
            await until_dropped(counted, root=False)  # the answer's counts are in, latency last
        tab = await signed_in_tab(browser, running.url, "ada", PASSWORDS["ada"])
        page = tab.page

        await page.goto(running.url + "/console/channels", timeout=TIMEOUT_MS)
        assert await page.locator("h1").inner_text() == "Channels"
        rows = page.locator("#channels tbody tr")
        assert [await rows.nth(i).get_attribute("data-account") for i in range(await rows.count())] == [
            "webchat:algebra", "webchat:lobby"]
        algebra = page.locator('tr[data-account="webchat:algebra"]')
        await algebra.locator('button[data-do="disable"]').click()
        await page.wait_for_url(running.url + "/console/channels", timeout=TIMEOUT_MS)
        assert await algebra.get_attribute("data-state") == "stopped"
        assert "disabled in the console by ada" in await algebra.locator(".reason").inner_text()
        assert "shared with another teacher" in await page.locator('tr[data-account="webchat:lobby"]').inner_text()
        await algebra.locator('button[data-do="enable"]').click()
        await page.wait_for_url(running.url + "/console/channels", timeout=TIMEOUT_MS)
        assert await algebra.locator('button[data-do="disable"]').count() == 1

        await page.click('a[href="/console/dashboard"]')
        await page.wait_for_url(running.url + "/console/dashboard", timeout=TIMEOUT_MS)
        assert await page.locator("h1").inner_text() == "Dashboard"
        assert await page.locator('[data-total="in"]').inner_text() == "1"
        assert await page.locator('[data-total="out"]').inner_text() == "1"
        assert await page.locator("figure.chart svg").count() == 3
        drawn = await page.eval_on_selector_all("#chart-messages rect.bar.in", "bars => bars.map(b => +b.dataset.value)")
        assert len(drawn) == 24 and sum(drawn) == 1  # a bar an hour, the exchange in one of them
        box = await page.locator("#chart-messages svg").bounding_box()
        assert box is not None and box["width"] > 100  # drawn, not collapsed
        await page.click("#span-week")
        await page.wait_for_url("**/console/dashboard?span=week", timeout=TIMEOUT_MS)
        assert await page.locator("#chart-messages text.tick").count() == 7
        assert tab.errors == []
        assert all(url.startswith(running.url + "/") for url in tab.requested), tab.requested  # nothing from a CDN
        await tab.close()
