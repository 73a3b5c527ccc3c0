"""The browser's language (``Accept-Language``) picks the language of the gateway's own notices on the web chat.

The gateway is the real one over real HTTP; the learner is :class:`~tests.e2e.rig.WebLearner`,
posting as the page does.  ``/stop`` with nothing running is answered from the phrase catalogue, so
what the learner reads shows which language the session's locale chose.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.phrases import CHINESE, ENGLISH, Phrase, say
from tests.e2e.rig import WebLearner, served

pytestmark = pytest.mark.timeout(120)

CHINESE_BROWSER = "zh-CN,zh;q=0.9,en;q=0.8"


def config_for(data_dir: Path, languages: list[str]):
    return parse_config({
        "data_dir": str(data_dir),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor", "languages": languages}],
        "bindings": [{"partner": "tutor", "channel": "webchat", "account": "default"}],
        "channels": {"webchat": {"default": {"access": {"dm": "open"}}}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
    })


async def stop_answer(gateway: Gateway, url: str, *, session_language: str | None,
                      message_language: str | None = None) -> str:
    """Open a session (with ``session_language`` as its Accept-Language), post /stop (with ``message_language``)."""
    learner = WebLearner(url)
    try:
        if session_language:
            learner.http.headers["Accept-Language"] = session_language
        await learner.open()
        learner.http.headers.pop("Accept-Language", None)
        if message_language:
            learner.http.headers["Accept-Language"] = message_language
        await learner.say("/stop")
        await learner.wait_for(lambda page: page.finished(), timeout=60, what="the /stop answer")
        [answer] = [shown.text for shown in learner.finished()]
        return answer
    finally:
        await learner.close()


@pytest.mark.parametrize(("header", "language"), [(CHINESE_BROWSER, CHINESE), ("en-US", ENGLISH), (None, ENGLISH)])
async def test_the_language_a_session_was_started_with_picks_the_notice(tmp_path, header, language):
    async with Gateway(config_for(tmp_path / "data", ["en", "zh-Hans"])) as gateway, served(gateway) as url:
        assert await stop_answer(gateway, url, session_language=header) == say(Phrase.NOTHING_TO_STOP, language)


async def test_an_english_browser_gets_english_from_a_chinese_first_partner(tmp_path):
    async with Gateway(config_for(tmp_path / "data", ["zh-Hans", "en"])) as gateway, served(gateway) as url:
        assert await stop_answer(gateway, url, session_language="en-US,en;q=0.9") == say(Phrase.NOTHING_TO_STOP, ENGLISH)


async def test_the_language_a_message_carries_wins_over_the_sessions(tmp_path):
    async with Gateway(config_for(tmp_path / "data", ["en", "zh-Hans"])) as gateway, served(gateway) as url:
        answer = await stop_answer(gateway, url, session_language="en-US", message_language=CHINESE_BROWSER)
        assert answer == say(Phrase.NOTHING_TO_STOP, CHINESE)


@pytest.mark.browser
async def test_a_chromium_set_to_chinese_reads_the_notice_in_chinese(tmp_path):
    """The real page in a browser whose language is zh-CN: nothing but the browser sends the header."""
    from gateway.defaults import default_config
    from tests.browser import TIMEOUT_MS, chromium
    from tests.channels.test_webchat_browser import greeted

    config = default_config(tmp_path / "data")
    partner = config.partners[0].model_copy(update={"languages": ("en", "zh-Hans")})
    config = config.model_copy(update={"partners": [partner]})
    async with Gateway(config) as gateway, served(gateway) as url, chromium() as browser:
        page = await browser.new_page(locale="zh-CN")
        await page.goto(url + "/channels/webchat/default/")
        await greeted(page)
        await page.fill("#text", "/stop")
        await page.press("#text", "Enter")
        answer = page.locator(".bubble.partner:not(.greeting) .body")
        await answer.wait_for(timeout=TIMEOUT_MS)
        assert (await answer.inner_text()).strip() == say(Phrase.NOTHING_TO_STOP, CHINESE)
