"""The Partners area in headless Chromium: sign in, create a partner with its model on the stub, talk to it in the
panel, bind it to the web chat, and a learner there is answered by it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.browser import TIMEOUT_MS, new_tab, signed_in_tab
from tests.console.brain_rig import STUB_KEY
from tests.console.partners_rig import serve_file, write_config
from tests.console.rig import PASSWORDS
from tests.e2e.rig import STUB_KEY_ENV
from tests.peers.model_stub import ModelStub, Reply

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("real_brain"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")]




async def test_a_teacher_creates_a_partner_and_it_answers_in_the_chat_panel(tmp_path: Path, browser):
    async with ModelStub() as stub:
        path = write_config(tmp_path, stub.api_base)
        async with serve_file(path, own_brain=True) as running:
            tab = await signed_in_tab(browser, running.url, "ada", PASSWORDS["ada"])
            page = tab.page

            await page.click("#new-partner")
            await page.wait_for_url("**/console/new-partner", timeout=TIMEOUT_MS)
            await page.fill("#partner-id", "history")
            await page.fill("#partner-name", "History")
            await page.select_option("#partner-persona", "homework-helper")
            await page.fill("#model-name", "openai/stub-model-history")
            await page.fill("#model-api-base", stub.api_base)
            await page.fill("#model-api-key", f"env:{STUB_KEY_ENV}")
            await page.click("#save-partner")
            await page.wait_for_url("**/console/partners/history?saved=1", timeout=TIMEOUT_MS)
            assert "Saved to the config file" in await page.locator(".notice").inner_text()
            entry = next(p for p in yaml.safe_load(path.read_text(encoding="utf-8"))["partners"] if p["id"] == "history")
            assert entry["owners"] == [{"channel": "telegram", "user": "100"}] and entry["persona"] == "homework-helper"

            await page.click("#test-model")
            await page.wait_for_selector("#model-test", timeout=TIMEOUT_MS)
            assert await page.locator("#model-test").get_attribute("data-ok") == "yes"
            assert "stub-model-history answered in" in await page.locator("#model-test").inner_text()

            stub.script(Reply.text("The Magna Carta was sealed in 1215 (capybara)."))
            await page.fill("#chat-text", "When was the Magna Carta sealed?")
            await page.click("#chat-send")
            await page.wait_for_selector("#chat-reply", timeout=TIMEOUT_MS)
            assert await page.locator("#chat-reply").inner_text() == "The Magna Carta was sealed in 1215 (capybara)."
            assert STUB_KEY not in await page.content()

            # Bound to the web chat in place of Algebra, History answers a learner there: no restart.
            await page.goto(running.url + "/console/partners/algebra/bindings", timeout=TIMEOUT_MS)
            await page.click('#bindings tr[data-binding="webchat/default//"] .remove-binding')
            await page.wait_for_url("**/console/partners/algebra/bindings?done=removed", timeout=TIMEOUT_MS)
            await page.goto(running.url + "/console/partners/history", timeout=TIMEOUT_MS)
            await page.click("#bindings-link")
            await page.wait_for_url("**/console/partners/history/bindings", timeout=TIMEOUT_MS)
            assert await page.locator("#no-bindings").count() == 1
            await page.select_option("#binding-account", "webchat/default")
            await page.click("#binding-add")
            await page.wait_for_url("**/console/partners/history/bindings?done=added", timeout=TIMEOUT_MS)
            assert await page.locator('#bindings tr[data-binding="webchat/default//"]').count() == 1

            stub.script(Reply.text("History answers the web chat now (okapi)."))
            learner = await new_tab(browser)
            chat = learner.page
            await chat.goto(running.url + "/channels/webchat/default/", timeout=TIMEOUT_MS)
            await chat.fill("#text", "Who answers here?")
            await chat.press("#text", "Enter")
            answer = chat.locator(".bubble.partner:not(.streaming)", has_text="okapi")
            await answer.wait_for(timeout=TIMEOUT_MS)
            assert stub.requests[-1]["model"] == "stub-model-history"  # History's model, not Algebra's
            assert [(b["partner"], b["channel"]) for b in yaml.safe_load(path.read_text(encoding="utf-8"))["bindings"]] == [
                ("history", "webchat")]
            assert tab.errors == [] and learner.errors == []
            assert all(url.startswith(running.url + "/") for url in tab.requested)  # nothing from a CDN
            await learner.close()
            await tab.close()
