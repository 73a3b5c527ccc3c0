"""The Official Account API client against the WeChat emulator over loopback: tokens kept and renewed, codes translated."""

from __future__ import annotations

import os
import uuid

import pytest

from channels.weixin.config import WeixinConfig
from channels.weixin.transport import OfficialAccountApi
from gateway.core.errors import AuthFailed, ReplyWindowClosed
from tests.peers.tencent_api import serving
from tests.peers.weixin_oa_server import WechatOA


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def settings(oa: WechatOA, api: str, secret: str | None = None):
    name = f"WX_T_{uuid.uuid4().hex[:8].upper()}"
    os.environ[name] = secret or oa.appsecret
    return WeixinConfig.model_validate({"kind": "official_account", "appid": oa.appid, "appsecret": f"env:{name}",
                                        "token": f"env:{name}", "mode": "plaintext", "api_base": api})


async def test_the_token_is_kept_until_shortly_before_it_expires_then_fetched_again():
    oa = WechatOA(mode="plaintext")
    async with serving(oa) as api:
        clock = Clock()
        client = OfficialAccountApi(settings(oa, api), clock=clock)
        try:
            first = await client.token()
            assert await client.token() == first and oa.tokens_issued == 1
            clock.now += 7200 - 60 - 1  # just inside the kept life (expires_in less the margin)
            assert await client.token() == first
            clock.now += 2
            assert await client.token() != first and oa.tokens_issued == 2
        finally:
            await client.close()


@pytest.mark.parametrize("code", [45015, 45047])
async def test_wechats_window_and_quota_codes_are_the_closed_window(code):
    oa = WechatOA(mode="plaintext")
    async with serving(oa) as api:
        client = OfficialAccountApi(settings(oa, api))
        try:
            oa._last_said["o-1"] = (1e12, 0)
            oa.fail_next(code)
            with pytest.raises(ReplyWindowClosed) as caught:
                await client.send_text("o-1", "hello")
            assert str(code) in str(caught.value)
        finally:
            await client.close()


async def test_a_token_refused_twice_is_the_accounts_problem_not_a_loop():
    oa = WechatOA(mode="plaintext")
    async with serving(oa) as api:
        client = OfficialAccountApi(settings(oa, api))
        try:
            oa._last_said["o-1"] = (1e12, 0)
            oa.fail_next(40001)
            oa.fail_next(40001)
            with pytest.raises(AuthFailed):
                await client.send_text("o-1", "hello")
            assert oa.tokens_issued == 2 and oa.sent == []  # one refresh, then given up
        finally:
            await client.close()


async def test_a_refused_appsecret_is_auth_failed_and_names_no_secret():
    oa = WechatOA(mode="plaintext")
    async with serving(oa) as api:
        wrong = uuid.uuid4().hex
        client = OfficialAccountApi(settings(oa, api, secret=wrong))
        try:
            with pytest.raises(AuthFailed) as caught:
                await client.token()
            assert "40125" in str(caught.value) and wrong not in str(caught.value)
        finally:
            await client.close()
