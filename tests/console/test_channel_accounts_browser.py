"""The Telegram add form in headless Chromium: a teacher pastes a token, the probe passes, the account runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.channels.test_webchat_browser import TIMEOUT_MS
from tests.console.rig import PASSWORDS, serve_console
from tests.console.test_channel_accounts import key, new_token  # noqa: F401 - the key fixture
from tests.console.test_console_browser import browser  # noqa: F401 - the fixture
from tests.peers.telegram_peer import TelegramUsers

pytestmark = pytest.mark.browser


async def test_a_teacher_adds_a_telegram_bot_with_the_guided_form(telegram_api, tmp_path: Path, browser, key):  # noqa: F811
    token = new_token()
    users = TelegramUsers(telegram_api, token)
    await users.register(username="form_quartz_bot")
    async with serve_console(tmp_path / "data") as running:
        context = await browser.new_context(locale="en-US")
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(running.url + "/console/login", timeout=TIMEOUT_MS)
        await page.fill("#username", "ada")
        await page.fill("#password", PASSWORDS["ada"])
        await page.click("#sign-in")
        await page.wait_for_url(running.url + "/console/", timeout=TIMEOUT_MS)

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
        assert errors == []
        await context.close()
    await users.aclose()
