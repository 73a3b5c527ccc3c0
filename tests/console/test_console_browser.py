"""The console in headless Chromium: the setup link, the first administrator, signing in, the partners, signing out."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.console.setup import first_start_token, setup_link
from tests.browser import TIMEOUT_MS, new_tab, sign_in
from tests.console.rig import PASSWORDS, serve_console

pytestmark = pytest.mark.browser

PASSWORD = "browser-admin-pw-teal-2207"


async def test_from_the_setup_link_to_signing_out(tmp_path: Path, browser):
    async with serve_console(tmp_path / "data", with_users=False) as running:
        link = setup_link(running.url, await first_start_token(running.gateway.store) or "")
        tab = await new_tab(browser)
        page, context = tab.page, tab.context

        await page.goto(link, timeout=TIMEOUT_MS)
        assert await page.locator("h1").inner_text() == "Create the first administrator"
        await page.fill("#username", "head")
        await page.fill("#display_name", "Head Teacher")
        await page.fill("#password", PASSWORD)
        await page.fill("#password_again", PASSWORD)
        await page.click("#create")
        await page.wait_for_url("**/console/login?created=1", timeout=TIMEOUT_MS)
        assert "administrator account is ready" in await page.locator(".notice").inner_text()

        await page.fill("#username", "head")
        await page.fill("#password", PASSWORD)
        await page.click("#sign-in")
        await page.wait_for_url(running.url + "/console/", timeout=TIMEOUT_MS)
        assert await page.locator("h1").inner_text() == "Partners"
        rows = page.locator("#partners tbody tr")
        assert await rows.count() == 3
        assert await rows.first.get_attribute("data-partner") == "algebra"
        assert "Signed in as Head Teacher (administrator)" in await page.locator("header").inner_text()
        [session] = [c for c in await context.cookies() if c["name"] == "partners_console"]
        assert session["httpOnly"] and session["sameSite"] == "Lax" and session["path"] == "/console"
        assert await page.evaluate("document.cookie") == ""
        css = await page.evaluate("getComputedStyle(document.querySelector('header')).borderBottomStyle")
        assert css == "solid"  # the committed stylesheet loaded (no CDN, no build)

        await page.click("#sign-out")
        await page.wait_for_url("**/console/login?signed_out=1", timeout=TIMEOUT_MS)
        assert "You have signed out." in await page.locator(".notice").inner_text()
        await page.goto(running.url + "/console/", timeout=TIMEOUT_MS)
        assert page.url.endswith("/console/login")  # the session is gone

        await page.goto(link, timeout=TIMEOUT_MS)  # the link worked once
        assert "cannot be used" in await page.locator(".error").inner_text()
        assert tab.errors == []
        assert all(url.startswith(running.url + "/") for url in tab.requested), tab.requested  # nothing from a CDN
        assert running.url + "/console/static/console.css" in tab.requested
        await tab.close()


async def test_the_console_speaks_chinese_to_a_chinese_browser(tmp_path: Path, browser):
    async with serve_console(tmp_path / "data") as running:
        tab = await new_tab(browser, locale="zh-CN")
        page = tab.page
        await page.goto(running.url + "/console/login", timeout=TIMEOUT_MS)
        assert await page.locator("h1").inner_text() == "登录"
        assert await page.get_attribute("html", "lang") == "zh-Hans"
        await sign_in(page, running.url, "ada", PASSWORDS["ada"])
        assert await page.locator("h1").inner_text() == "学伴"
        assert await page.locator("#partners tbody tr").count() == 2
        await tab.close()
