"""The API tokens page in headless Chromium, in Chinese: make a token, see it once, use it, revoke it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import TIMEOUT_MS, signed_in_tab
from tests.console.rig import PASSWORDS, client, serve_console

pytestmark = pytest.mark.browser


async def test_a_teacher_makes_uses_and_revokes_a_token_in_the_page(tmp_path: Path, browser):
    async with serve_console(tmp_path / "data") as running:
        tab = await signed_in_tab(browser, running.url, "ada", PASSWORDS["ada"], locale="zh-CN")
        page = tab.page
        await page.click("text=API 令牌")
        await page.wait_for_url("**/console/tokens", timeout=TIMEOUT_MS)
        assert await page.locator("h1").inner_text() == "API 令牌"
        assert await page.locator(".empty").inner_text() == "还没有令牌。"

        await page.fill("#new-token input[name=name]", "成绩同步")
        await page.fill("#new-token input[name=expires_in_days]", "30")
        await page.click("#new-token button[type=submit]")
        await page.wait_for_selector("#token-secret", timeout=TIMEOUT_MS)
        secret = await page.locator("#token-secret").inner_text()
        assert "成绩同步" in await page.locator("#made-token").inner_text()
        async with client(running.url, headers={"Authorization": f"Bearer {secret}"}) as script:
            partners = (await script.get("/console/api/partners")).json()["partners"]
            assert [p["id"] for p in partners] == ["algebra", "geometry"]

            await page.goto(running.url + "/console/tokens", timeout=TIMEOUT_MS)
            assert await page.locator("#token-secret").count() == 0  # shown once
            assert secret not in await page.content()
            row = page.locator("#tokens tbody tr")
            assert await row.count() == 1 and "成绩同步" in await row.inner_text()
            await page.click("#tokens button.revoke")
            await page.wait_for_url("**/console/tokens?revoked=1", timeout=TIMEOUT_MS)
            assert await page.locator(".notice").inner_text() == "令牌已吊销，不能再使用。"
            assert (await script.get("/console/api/partners")).status_code == 401
        assert tab.errors == []
        await tab.close()
