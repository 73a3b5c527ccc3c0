"""The login page a running gateway serves for a personal WeChat account that waits for its QR login."""

from __future__ import annotations

import logging
import re

import httpx

from gateway.core.channel import ChannelState
from gateway.http.app import build_app
from tests.contract.harness import eventually

PAGE = "/channels/weixin/school/login"


async def _waiting(rig, caplog) -> str:
    """The page's path with its token, as the gateway's log line prints it once the account waits."""
    await eventually(lambda: rig.gateway.supervisor.health()["weixin:school"].state is ChannelState.ACTION_REQUIRED,
                     what="action_required")
    found = await eventually(lambda: re.search(r"(/channels/weixin/school/login\?t=\S+)", caplog.text),
                             what="the login page's log line")
    return found.group(1)


async def test_the_page_shows_the_code_as_svg_follows_the_scan_and_logs_the_account_in(ilink_rig, caplog):
    caplog.set_level(logging.INFO)
    rig = await ilink_rig(login=False)
    path = await _waiting(rig, caplog)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(rig.gateway)),
                                 base_url="http://127.0.0.1") as http:
        async def page_with(text: str) -> str | None:
            answer = await http.get(path)
            assert answer.status_code == 200, answer.text
            return answer.text if text in answer.text else None

        first = await eventually(lambda: page_with("<svg"), what="the QR code on the page")
        assert 'data-state="wait"' in first and 'http-equiv="refresh"' in first
        await eventually(lambda: "wait" in rig.peer.answered, what="the page's login to ask for the status")
        await rig.peer.scan()
        await eventually(lambda: page_with("Scanned."), what="the page to show the scan")
        await rig.peer.confirm()
        await eventually(lambda: rig.gateway.supervisor.health()["weixin:school"].state is ChannelState.RUNNING,
                         what="the account to run on the page's login")
        assert "<svg" not in await eventually(lambda: page_with("Confirmed."), what="the page to say it is done")
    assert rig.peer.token not in caplog.text


async def test_the_page_refuses_a_request_without_its_token(ilink_rig, caplog):
    caplog.set_level(logging.INFO)
    rig = await ilink_rig(login=False)
    path = await _waiting(rig, caplog)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(rig.gateway)),
                                 base_url="http://127.0.0.1") as http:
        assert (await http.get(PAGE)).status_code == 403
        assert (await http.get(PAGE + "?t=" + "x" * 32)).status_code == 403
        assert (await http.get(path[:-1] + ("A" if path[-1] != "A" else "B"))).status_code == 403
    assert rig.peer.logins == {}  # nothing asked the platform for a code


async def test_a_logged_in_account_has_no_login_page(ilink_rig):
    rig = await ilink_rig()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(rig.gateway)),
                                 base_url="http://127.0.0.1") as http:
        assert (await http.get(PAGE + "?t=anything")).status_code == 404


async def test_the_page_speaks_simplified_chinese_to_a_browser_that_asks_for_it(ilink_rig, caplog):
    caplog.set_level(logging.INFO)
    rig = await ilink_rig(login=False)
    path = await _waiting(rig, caplog)
    chinese = {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=build_app(rig.gateway)),
                                 base_url="http://127.0.0.1") as http:
        async def page_with(text: str, headers: dict[str, str]) -> httpx.Response | None:
            answer = await http.get(path, headers=headers)
            return answer if text in answer.text else None

        waiting = await eventually(lambda: page_with("<svg", chinese), what="the QR code on the Chinese page")
        assert '<html lang="zh-Hans">' in waiting.text and "个人微信登录：school" in waiting.text
        assert "等待扫码" in waiting.text and "Waiting for the scan" not in waiting.text
        assert waiting.headers["Content-Language"] == "zh-Hans" and "Accept-Language" in waiting.headers["Vary"]
        await eventually(lambda: "wait" in rig.peer.answered, what="the page's login to ask for the status")
        await rig.peer.scan()
        await eventually(lambda: page_with("已扫码", chinese), what="the Chinese page to show the scan")
        english = await http.get(path, headers={"Accept-Language": "fr-FR, de;q=0.5"})  # none the catalogue has
        assert '<html lang="en">' in english.text and "Scanned." in english.text
        refused = await http.get(PAGE, headers=chinese)
        assert refused.status_code == 403 and "网关日志" in refused.text


def test_the_page_language_follows_the_browsers_highest_weight():
    from channels.weixin.ilink.page import page_language

    assert page_language("zh-CN,zh;q=0.9,en;q=0.8") == "zh-Hans"
    assert page_language("en-GB,zh-CN;q=0.5") == "en"
    assert page_language("de;q=0.9, zh-Hans;q=0.95") == "zh-Hans"
    assert page_language("zh-TW") == "en"  # Traditional: the catalogue has no text for it
    assert page_language(None) == page_language("") == "en"
