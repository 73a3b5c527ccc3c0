"""Script a learner types or a model writes never runs in the web chat page, in real Chromium.

A learner sends, and the model answers (streamed preview, then final text,
with attachments), every usual way of smuggling script into a page: ``<script>``,
event-handler attributes, ``javascript:`` and ``data:`` links in HTML and in
Markdown, SVG, iframes, HTML entities that decode to markup.  Each payload, if
it ran, would set ``window.__pwned`` or open a dialog.  The page is loaded
twice: once with its Content-Security-Policy bypassed, so that the escaping
itself is what is tested, and once as served, with the policy as the second
guard.  The text must show, escaped, as the words that were written.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.core.config import PipelineConfig
from gateway.core.events import RuntimeEvent, StreamDelta, StreamEnd, TurnEnd
from gateway.core.messages import Attachment
from gateway.core.turns import Turn
from gateway.defaults import default_config
from tests.browser import TIMEOUT_MS
from tests.browser import chromium as launch_chromium
from tests.e2e.rig import served

pytestmark = pytest.mark.browser


LEARNER_SAYS = ('<script>window.__pwned="learner script"</script> <img src=x onerror="window.__pwned=\'learner img\'"> '
                '[go](javascript:alert("learner link")) &lt;b&gt;bold?&lt;/b&gt; &#60;script&#62;')
PAYLOADS = (
    'Here: <script>window.__pwned="model script"; alert("model script")</script>',
    '<img src="x" onerror="window.__pwned=\'model img\'; alert(1)">',
    '[click me](javascript:window.__pwned="markdown link";alert(2))',
    '[spaced](  JaVaScRiPt:window.__pwned="mixed case link")',
    '[tab](java\tscript:window.__pwned="tab link")',
    '[data](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX19wd25lZD0iZGF0YSI8L3NjcmlwdD4=)',
    '![pic](javascript:window.__pwned="markdown image")',
    '<a href="javascript:window.__pwned=\'raw link\'">raw link</a>',
    '<svg onload="window.__pwned=\'svg\'"><circle r="5"/></svg>',
    '<iframe src="javascript:window.__pwned=\'iframe\'"></iframe>',
    '<details open ontoggle="window.__pwned=\'details\'">x</details>',
    "&lt;script&gt;window.__pwned='entity'&lt;/script&gt; &#x3C;img src=x onerror=alert(3)&#x3E;",
    "`<script>window.__pwned='code'</script>`",
    "<style>body{background:url(javascript:alert(4))}</style>",
)
MODEL_ANSWER = "\n\n".join(PAYLOADS)
PREVIEW = ["<script>window.__pwned='preview'</script> ", '<img src=x onerror="window.__pwned=\'preview img\'">']
ATTACHMENTS = (
    Attachment(kind="image", url="javascript:window.__pwned='attachment'", name="<img src=x onerror=alert(5)>"),
    Attachment(kind="file", url='https://example.invalid/a.pdf" onclick="window.__pwned=1', name="<b>notes</b>"),
)
VISIBLE = ["<script>window.__pwned=\"model script\"", 'onerror="window.__pwned=\'model img\'', "raw link</a>", "<svg",
           "<script>window.__pwned='entity'</script>", "<img src=x onerror=alert(3)>", "<b>notes</b>"]
"""Bits that must show as the characters written: markup as text, entities decoded to text, never to tags."""


class InjectingResponder:
    """Streams a preview of markup, then ends with the whole payload list and two hostile attachments."""

    name = "injector"

    def __init__(self) -> None:
        self.turns: list[Turn] = []

    async def respond(self, turn: Turn) -> AsyncIterator[RuntimeEvent]:
        self.turns.append(turn)
        for piece in PREVIEW:
            yield StreamDelta(text=piece)
            await asyncio.sleep(0.1)
        yield StreamEnd(markdown=MODEL_ANSWER, attachments=ATTACHMENTS)
        yield TurnEnd()


@dataclass
class Running:
    url: str
    responder: InjectingResponder


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Running]:
    fast = PipelineConfig(coalesce_window_s=0.05, coalesce_max_s=0.2, shutdown_drain_s=1.0)
    config = default_config(tmp_path / "data").model_copy(update={"pipeline": fast})
    responder = InjectingResponder()
    async with Gateway(config, responder=responder) as gateway, served(gateway) as url:
        yield Running(url, responder)


@pytest.fixture
async def chromium() -> AsyncIterator[Any]:
    async with launch_chromium() as browser:
        yield browser


HOSTILE_DOM = """() => {
  const inBubbles = sel => Array.from(document.querySelectorAll('#messages ' + sel));
  const handlers = inBubbles('*').filter(el => Array.from(el.attributes).some(a => a.name.startsWith('on')));
  const badLinks = inBubbles('a[href], img[src], iframe[src]').filter(el => {
    const url = (el.getAttribute('href') || el.getAttribute('src') || '').replace(/[\\s\\u0000-\\u001f]/g, '').toLowerCase();
    return !(url.startsWith('http:') || url.startsWith('https:') || url.startsWith('/') || url.startsWith('#'));
  });
  return {pwned: window.__pwned === undefined ? null : String(window.__pwned),
          scripts: inBubbles('script, iframe, svg, style, object, embed, details').length,
          handlers: handlers.map(el => el.outerHTML.slice(0, 120)),
          badLinks: badLinks.map(el => el.outerHTML.slice(0, 120))};
}"""


@pytest.mark.parametrize("csp", ["bypassed", "as served"])
async def test_no_payload_runs_and_every_one_shows_as_text(running: Running, chromium: Any, csp: str) -> None:
    context = await chromium.new_context(bypass_csp=csp == "bypassed")
    page = await context.new_page()
    dialogs: list[str] = []
    errors: list[str] = []

    async def dismiss(dialog: Any) -> None:
        dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", dismiss)
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        await page.goto(running.url + "/")
        await page.locator(".bubble.partner").first.wait_for(timeout=TIMEOUT_MS)  # the greeting
        await page.fill("#text", LEARNER_SAYS)
        await page.press("#text", "Enter")
        await page.locator(".bubble.partner.streaming").wait_for(timeout=TIMEOUT_MS)
        assert await page.evaluate(HOSTILE_DOM) == {"pwned": None, "scripts": 0, "handlers": [], "badLinks": []}
        await page.wait_for_function(
            "() => Array.from(document.querySelectorAll('.bubble.partner:not(.streaming) .body'))"
            ".some(b => b.textContent.includes('raw link'))", timeout=TIMEOUT_MS)
        await page.locator(".bubble.partner a.attachment").first.wait_for(timeout=TIMEOUT_MS)
        for link in await page.locator("#messages a").all():  # hover and focus every link: nothing fires
            await link.hover()
            await link.focus()
        await asyncio.sleep(0.5)  # an image's onerror fires once its load failed
        checks = [await page.evaluate(HOSTILE_DOM)]
        shown = "\n".join(await page.locator(".bubble.partner").all_inner_texts())  # a file is a bubble of its own
        learner = await page.locator(".bubble.learner .body").inner_text()

        await page.reload()  # the backlog renders the same conversation again
        await page.locator(".bubble.partner a.attachment").first.wait_for(timeout=TIMEOUT_MS)
        await asyncio.sleep(0.5)
        checks.append(await page.evaluate(HOSTILE_DOM))
    finally:
        await context.close()
    assert checks == [{"pwned": None, "scripts": 0, "handlers": [], "badLinks": []}] * 2
    assert dialogs == [] and errors == []
    assert learner == LEARNER_SAYS, "the learner's words show exactly as typed"
    assert [bit for bit in VISIBLE if bit not in shown] == [], shown
    [turn] = running.responder.turns
    assert turn.text == LEARNER_SAYS
