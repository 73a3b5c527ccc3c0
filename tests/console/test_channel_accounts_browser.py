"""The Telegram add form in headless Chromium: a teacher pastes a token, the probe passes, the account runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import TIMEOUT_MS, signed_in_tab
from tests.console.rig import PASSWORDS, serve_console
from tests.console.test_channel_accounts import key, new_token  # noqa: F401 - the key fixture
from tests.peers.telegram_peer import TelegramUsers

pytestmark = pytest.mark.browser


async def test_a_teacher_adds_a_telegram_bot_with_the_guided_form(telegram_api, tmp_path: Path, browser, key):  # noqa: F811 - key
    token = new_token()
    users = TelegramUsers(telegram_api, token)
    await users.register(username="form_quartz_bot")
    async with serve_console(tmp_path / "data") as running:
        tab = await signed_in_tab(browser, running.url, "ada", PASSWORDS["ada"])
        page = tab.page

        await page.goto(running.url + "/console/channels", timeout=TIMEOUT_MS)
        await page.click("#add-channel-account")
        await page.click('a[data-channel="telegram"]')
        await page.wait_for_url("**/console/channel-accounts/new/telegram", timeout=TIMEOUT_MS)
        assert await page.locator("#f-token").get_attribute("type") == "password"
        assert "@BotFather" in await page.locator(".steps").inner_text()
        await page.fill("#f-account", "main")
        await page.select_option("#f-partner", "geometry")
        await page.fill("#f-token", "123:wrong-quartz-token")  # the right shape, but the emulator knows no such bot
        await page.click("details summary")  # more settings: where the Bot API is
        await page.fill("#f-api_url", telegram_api)
        await page.select_option("#f-dm", "open")
        await page.click("#add-account")
        await page.wait_for_selector("#problems", timeout=TIMEOUT_MS)
        assert "Telegram says the token is invalid" in await page.locator("#problems").inner_text()
        assert await page.locator("#f-token").input_value() == ""  # a secret is never sent back

        await page.fill("#f-token", token)
        if not await page.locator("#f-api_url").is_visible():
            await page.click("details summary")
        await page.fill("#f-api_url", telegram_api)
        await page.click("#add-account")
        await page.wait_for_url("**/console/channels?added=telegram:main", timeout=TIMEOUT_MS)
        assert "Added telegram:main" in await page.locator("#added").inner_text()
        row = page.locator('tr[data-account="telegram:main"]')
        assert "geometry" in await row.inner_text()
        assert "secrets set" in await row.locator(".sealed").inner_text()
        assert token not in await page.content()
        assert tab.errors == []
        assert all(url.startswith(running.url + "/") for url in tab.requested), tab.requested  # nothing from a CDN
        await tab.close()
    await users.aclose()
