"""The web chat page in headless Chromium, against a real gateway with a streaming responder."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.core.config import PipelineConfig
from gateway.core.events import RuntimeEvent, StreamDelta, StreamEnd, TurnEnd
from gateway.core.turns import Turn
from gateway.defaults import SAMPLE_GREETING, default_config
from tests.browser import TIMEOUT_MS, chromium
from tests.e2e.rig import served
from tests.waits import HANG_S

pytestmark = pytest.mark.browser

PARTIAL = ["Seven ", "eights ", "are"]
FINAL = "Seven eights are **56**."
ANSWER = ".bubble.partner:not(.greeting)"
"""The answers, not the greeting a new session opens with (marked by the test once it has seen it)."""


class GatedResponder:
    """Streams a few deltas, then holds the final answer until the test has seen the preview."""

    name = "test-streamer"

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.turns: list[Turn] = []

    async def respond(self, turn: Turn) -> AsyncIterator[RuntimeEvent]:
        self.turns.append(turn)
        for piece in PARTIAL:
            yield StreamDelta(text=piece)
            await asyncio.sleep(0.1)
        await asyncio.wait_for(self.release.wait(), HANG_S)
        yield StreamEnd(markdown=FINAL)
        yield TurnEnd()


@dataclass
class Running:
    url: str
    gateway: Gateway
    responder: GatedResponder


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    fast = PipelineConfig(coalesce_window_s=0.05, coalesce_max_s=0.2, shutdown_drain_s=1.0)
    config = default_config(tmp_path / "data").model_copy(update={"pipeline": fast})
    responder = GatedResponder()
    async with Gateway(config, responder=responder) as gateway, served(gateway) as url:
        try:
            yield Running(url, gateway, responder)
        finally:
            responder.release.set()


async def greeted(page) -> None:
    """A new session opens with the partner's greeting, the first bubble; marked so ANSWER leaves it out."""
    first = page.locator(".bubble.partner").first
    await first.wait_for(timeout=TIMEOUT_MS)
    assert (await first.inner_text()).strip() == SAMPLE_GREETING
    await first.evaluate("li => li.classList.add('greeting')")


@pytest.fixture
async def page():
    async with chromium() as browser:
        tab = await browser.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda error: errors.append(str(error)))
        yield tab
        assert errors == []


async def test_a_learner_sees_the_answer_stream_in_and_end_formatted(running: Running, page) -> None:
    await page.goto(running.url + "/")  # the gateway redirects to its web chat page
    assert page.url == running.url + "/channels/webchat/default/"
    assert await page.title() == "Study Buddy"  # the partner's name, not "Study partner"
    assert await page.locator("h1").inner_text() == "Study Buddy"
    await greeted(page)
    assert await page.locator(".bubble.learner").count() == 0  # the page's /start is never shown as sent

    await page.fill("#text", "What is 7 x 8?")
    await page.press("#text", "Enter")
    learner = page.locator(".bubble.learner .body")
    await learner.wait_for(timeout=TIMEOUT_MS)  # shown at once, before the gateway answered the POST
    assert await learner.inner_text() == "What is 7 x 8?"
    assert await page.input_value("#text") == ""

    # The preview shows while the answer is still being written.
    partner = page.locator(ANSWER)
    await page.wait_for_function(
        "() => { const b = document.querySelector('.bubble.partner:not(.greeting) .body'); "
        "return b && b.textContent.includes('Seven eights'); }",
        timeout=TIMEOUT_MS,
    )
    assert "56" not in await partner.inner_text()
    assert await page.locator(f"{ANSWER} strong").count() == 0

    running.responder.release.set()
    await page.locator(f"{ANSWER}:not(.streaming) strong").wait_for(timeout=TIMEOUT_MS)
    assert await page.locator(f"{ANSWER} strong").inner_text() == "56"
    assert (await partner.inner_text()).strip() == "Seven eights are 56."
    assert await partner.count() == 1  # the final answer replaced the preview, no second bubble
    assert await page.get_attribute(".bubble.learner", "data-state") == "sent"

    [turn] = running.responder.turns  # the greeting came from the gateway, not the responder
    assert turn.text == "What is 7 x 8?"

    # A reload keeps the conversation, does not send the message again, and is not greeted again.
    await page.reload()
    await page.locator(".bubble.partner strong").wait_for(timeout=TIMEOUT_MS)
    assert await page.locator(".bubble").count() == 3
    await asyncio.sleep(0.3)
    assert len(running.responder.turns) == 1
    assert await page.locator(".bubble.partner").count() == 2


async def test_shift_enter_starts_a_new_line_instead_of_sending(running: Running, page) -> None:
    running.responder.release.set()
    await page.goto(running.url + "/channels/webchat/default/")
    await greeted(page)
    await page.fill("#text", "first line")
    await page.press("#text", "Shift+Enter")
    await page.type("#text", "second line")
    assert await page.locator(".bubble.learner").count() == 0
    await page.click("#send")
    await page.locator(".bubble.learner").wait_for(timeout=TIMEOUT_MS)
    assert await page.locator(".bubble.learner .body").inner_text() == "first line\nsecond line"
    await page.locator(f"{ANSWER}:not(.streaming) strong").wait_for(timeout=TIMEOUT_MS)


async def test_a_post_whose_answer_is_lost_is_retried_with_the_same_id_and_answered_once(running: Running, page) -> None:
    running.responder.release.set()
    posted: list[dict[str, str]] = []

    async def answer_lost_once(route) -> None:
        if route.request.post_data_json["text"] == "/start":
            await route.continue_()
            return
        posted.append(route.request.post_data_json)
        if len(posted) == 1:
            await route.fetch()  # the gateway stores the message...
            await route.abort("connectionreset")  # ...but the page never hears back
        else:
            await route.continue_()

    await page.route("**/api/messages", answer_lost_once)
    await page.goto(running.url + "/channels/webchat/default/")
    await greeted(page)
    await page.fill("#text", "What is 7 x 8?")
    await page.press("#text", "Enter")
    await page.locator(".bubble.learner[data-state='sent']").wait_for(timeout=TIMEOUT_MS)
    await page.locator(f"{ANSWER}:not(.streaming) strong").wait_for(timeout=TIMEOUT_MS)

    assert len(posted) == 2
    assert posted[0] == posted[1]  # same session, same message_id, same text
    await asyncio.sleep(0.3)
    assert len(running.responder.turns) == 1
    assert await page.locator(ANSWER).count() == 1


async def test_the_session_lives_in_an_httponly_cookie_no_url_or_script_sees(running: Running, page) -> None:
    running.responder.release.set()
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    await page.goto(running.url + "/channels/webchat/default/")
    await greeted(page)

    [cookie] = await page.context.cookies()
    assert cookie["name"] == "partners_webchat"
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert cookie["path"] == "/channels/webchat/default/"
    assert await page.evaluate("document.cookie") == ""  # the page's script cannot read it
    assert not any(cookie["value"] in url for url in requested)  # nor does any URL carry it
    assert any(url.endswith("/api/events") for url in requested)
    stored = await page.evaluate("JSON.stringify(Object.assign({}, localStorage))")
    assert cookie["value"] not in stored
