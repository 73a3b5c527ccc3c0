"""Headless Chromium for the browser tests: Debian's own chromium, launched one way, and a signed-in console tab.

Every browser test drives the system Chromium (``/usr/bin/chromium``, the one ``apt install chromium``
gives) through Playwright, with the same switches: headless, no sandbox (a container has none), and
nothing of its own on the network (no updates, no sync, no QUIC), since the loopback guard fails any
connection beyond 127.0.0.1.  :func:`chromium` is that launch; the ``browser`` fixture of
``tests/console/conftest.py`` and the web chat tests' ``page`` fixture are built on it, and so is
``docs/screenshots.py``.

A console test opens a :class:`Tab` (a fresh context, so no cookie leaks between tests) and usually
signs in first with :func:`signed_in_tab`; the tab records every uncaught script error and every URL
asked for, which a test checks at its end (no script error, nothing from a CDN).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.waits import HANG_S

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
TIMEOUT_MS = int(HANG_S * 1000)
"""Playwright's waits take milliseconds: the same bound as every other liveness wait."""


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A headless Chromium for the length of the block, closed after (and Playwright's driver with it)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


@dataclass
class Tab:
    """One page in a context of its own, and what it saw."""

    context: BrowserContext
    page: Page
    errors: list[str] = field(default_factory=list)
    """Every uncaught script error of the page."""
    requested: list[str] = field(default_factory=list)
    """Every URL the page asked for, in order."""

    async def close(self) -> None:
        await self.context.close()


async def new_tab(browser: Browser, *, locale: str = "en-US", **options: Any) -> Tab:
    """A fresh context in ``locale`` (``options`` go to ``new_context``: a viewport, ``accept_downloads``)."""
    context = await browser.new_context(locale=locale, **options)
    tab = Tab(context, await context.new_page())
    tab.page.on("pageerror", lambda error: tab.errors.append(str(error)))
    tab.page.on("request", lambda request: tab.requested.append(request.url))
    return tab


async def sign_in(page: Page, url: str, username: str, password: str) -> None:
    """Sign in to the console at ``url`` through its login form, and wait for the partners page."""
    await page.goto(url + "/console/login", timeout=TIMEOUT_MS)
    await page.fill("#username", username)
    await page.fill("#password", password)
    await page.click("#sign-in")
    await page.wait_for_url(url + "/console/", timeout=TIMEOUT_MS)


async def signed_in_tab(browser: Browser, url: str, username: str, password: str, **options: Any) -> Tab:
    """A new tab (see :func:`new_tab`) already signed in as ``username``."""
    tab = await new_tab(browser, **options)
    await sign_in(tab.page, url, username, password)
    return tab
