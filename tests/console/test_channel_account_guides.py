"""The guided forms beyond Telegram and Slack, over real HTTP, each against its channel's own peer.

For each of Discord (the Gateway + REST emulator), Matrix (the session's real Synapse), email (Dovecot
and the SMTP server), the WeChat Official Account (the WeChat emulator) and the WeCom self-built app
(the WeCom emulator): the form shows its steps and a password input for each secret; a bad credential
comes back with the probe's own reason and stores nothing; a good account is probed, stored and runs.
The WeCom AI bot's probe checks settings only, so its bad case is a bad setting.  The "new account"
page lists one entry per guide -- two for WeChat and two for WeCom, one per kind -- and says why the
web chat is not among them.
"""

from __future__ import annotations

import uuid
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx

from tests.console.rig import csrf_of, serve_console, signed_in
from tests.console.test_channel_accounts import key, listed, stored_bytes, until_running

__all__ = ["key"]  # the fixture, used by name


async def add(http: httpx.AsyncClient, guide: str, settings: dict[str, Any], *, partner: str = "algebra",
              account: str = "main") -> httpx.Response:
    return await http.post(f"/console/api/channel-accounts/{guide}", headers={"X-CSRF-Token": await csrf_of(http)},
                           json={"account": account, "partner": partner, "settings": settings})


async def refused_then_added(running: Any, http: httpx.AsyncClient, guide: str, channel: str, bad: dict[str, Any],
                             good: dict[str, Any]) -> tuple[str, dict]:
    """The bad settings' first reason (nothing stored), then the good ones added and running."""
    refused = await add(http, guide, bad)
    assert refused.status_code == 400 and not refused.json()["added"], refused.text
    assert await running.gateway.store.stored_accounts() == []
    assert f"{channel}:main" not in await listed(http)
    added = await add(http, guide, good)
    assert added.status_code == 201 and added.json()["added"], added.text
    found = await until_running(http, f"{channel}:main")
    assert found["partners"] == ["algebra"] and found["added_in_console"]
    return refused.json()["problems"][0]["message"], found


async def test_the_new_account_page_lists_each_kind_and_says_why_the_web_chat_is_not_there(tmp_path: Path, key):
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ada")) as ada:
        page = (await ada.get("/console/channel-accounts/new")).text
        for path in ("telegram", "slack", "weixin", "weixin-official-account", "discord", "matrix", "email", "wecom",
                     "wecom-app"):
            assert f'href="/console/channel-accounts/new/{path}"' in page, path
        assert 'id="built-in"' in page and "web chat" in page and "no account and no password" in page
        assert (await ada.get("/console/channel-accounts/new/webchat")).status_code == 404
        zh = (await ada.get("/console/channel-accounts/new", headers={"Accept-Language": "zh-CN"})).text
        assert "微信公众号" in zh and "网页聊天" in zh


async def test_a_discord_bot_is_checked_against_the_emulator_and_runs(tmp_path: Path, key):
    from tests.contract.discord_harness import new_token
    from tests.peers.discord_server import DiscordPeer

    peer = await DiscordPeer(token=new_token()).start()
    endpoints = {"api_base": peer.api_base, "gateway_url": peer.gateway_url}
    try:
        async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ada")) as ada:
            form = (await ada.get("/console/channel-accounts/new/discord")).text
            assert 'type="password" name="token"' in form and "Reset Token" in form and "Message Content Intent" in form
            reason, _ = await refused_then_added(running, ada, "discord", "discord",
                                                 {"token": new_token(), **endpoints}, {"token": peer.token, **endpoints})
            assert "Discord" in reason and "token" in reason, reason
            assert peer.connected
        assert peer.token.encode() not in stored_bytes(tmp_path / "data")
    finally:
        await peer.stop()


async def test_a_matrix_account_is_checked_at_synapse_and_runs(synapse, tmp_path: Path, key):
    bot = synapse.register(f"console-{uuid.uuid4().hex[:8]}")
    base = {"homeserver": synapse.url, "user_id": bot.user_id}
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ada")) as ada:
        form = (await ada.get("/console/channel-accounts/new/matrix")).text
        assert 'type="password" name="access_token"' in form and 'type="password" name="password"' in form
        assert "@tutor:matrix.org" in form
        reason, _ = await refused_then_added(
            running, ada, "matrix", "matrix", {**base, "password": "pw-not-quartz-5531", "device_id": "partners"},
            {**base, "access_token": bot.access_token})
        assert reason.startswith(f"the homeserver {synapse.url} refused the bot's credentials"), reason
        neither = await add(ada, "matrix", base, account="other")
        assert neither.status_code == 400 and "access_token (preferred) or password" in neither.text
    assert bot.access_token.encode() not in stored_bytes(tmp_path / "data")


async def test_a_mailbox_is_checked_over_imap_and_smtp_and_runs(email_peer, tmp_path: Path, key):
    address = email_peer.new_address("bot")
    settings = {"address": address, "imap_host": "127.0.0.1", "imap_port": email_peer.imap_port, "imap_security": "none",
                "smtp_host": "127.0.0.1", "smtp_port": email_peer.smtp_port, "smtp_security": "none"}
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ada")) as ada:
        form = (await ada.get("/console/channel-accounts/new/email")).text
        assert 'type="password" name="password"' in form and "app password" in form
        assert '<option value="starttls" selected>' in form  # the model's Enum, offered as a choice
        reason, _ = await refused_then_added(running, ada, "email", "email",
                                             {**settings, "password": "pw-not-quartz-5531"},
                                             {**settings, "password": email_peer.password})
        assert "IMAP" in reason and "refused" in reason, reason
    assert email_peer.password.encode() not in stored_bytes(tmp_path / "data")


async def test_an_official_account_is_checked_at_the_wechat_emulator_and_runs(tmp_path: Path, key):
    from tests.peers.tencent_api import serving
    from tests.peers.weixin_oa_server import WechatOA

    oa = WechatOA(mode="safe")
    async with serving(oa) as api, serve_console(tmp_path / "data") as running, \
            aclosing(await signed_in(running.url, "ada")) as ada:
        form = (await ada.get("/console/channel-accounts/new/weixin-official-account")).text
        assert 'type="password" name="appsecret"' in form and "mp.weixin.qq.com" in form
        assert 'action="/console/channel-accounts/new/weixin-official-account"' in form
        settings = {"appid": oa.appid, "token": oa.token, "encoding_aes_key": oa.aes_key, "api_base": api}
        reason, found = await refused_then_added(running, ada, "weixin-official-account", "weixin",
                                                 {**settings, "appsecret": "not-the-quartz-5531"},
                                                 {**settings, "appsecret": oa.appsecret})
        assert "AppSecret" in reason or "appsecret" in reason, reason
        secrets = (await ada.get("/console/channel-accounts/weixin/main/secrets")).text
        assert '<span class="state" data-secret="appsecret">set</span>' in secrets  # the kind's own secrets
        [row] = await running.gateway.store.stored_accounts()
        assert row.channel == "weixin" and row.account == "main"
    assert oa.appsecret.encode() not in stored_bytes(tmp_path / "data")


async def test_a_wecom_self_built_app_is_checked_with_gettoken_and_its_secrets_nest_under_mode(tmp_path: Path, key):
    from tests.peers.tencent_api import serving
    from tests.peers.wecom_app_server import WecomApp

    app = WecomApp()
    async with serving(app) as api, serve_console(tmp_path / "data") as running, \
            aclosing(await signed_in(running.url, "ada")) as ada:
        form = (await ada.get("/console/channel-accounts/new/wecom-app")).text
        assert 'type="password" name="corpsecret"' in form and 'type="password" name="encoding_aes_key"' in form
        assert "企业可信IP" in form
        mode = {"corpid": app.corpid, "agentid": app.agentid, "token": app.token, "encoding_aes_key": app.aes_key,
                "api_base": api}
        reason, _ = await refused_then_added(running, ada, "wecom-app", "wecom",
                                             {"mode": {**mode, "corpsecret": "not-the-quartz-5531"}},
                                             {"mode": {**mode, "corpsecret": app.corpsecret}})
        assert reason.startswith("cgi-bin/gettoken failed"), reason
        stored = running.gateway.stored_settings("wecom", "main")
        assert stored["mode"]["kind"] == "app" and "kind" not in stored  # the guide's kind, where the model reads it
        secrets = (await ada.get("/console/channel-accounts/wecom/main/secrets")).text
        assert '<span class="state" data-secret="corpsecret">set</span>' in secrets
        csrf = await csrf_of(ada)
        wrong = await ada.put("/console/api/channel-accounts/wecom/main/secrets", headers={"X-CSRF-Token": csrf},
                              json={"secrets": {"corpsecret": "still-not-quartz-5531"}})
        assert wrong.status_code == 400 and wrong.json()["problems"][0]["message"].startswith("cgi-bin/gettoken failed")
        assert running.gateway.stored_settings("wecom", "main")["mode"]["corpsecret"] == app.corpsecret
    assert app.corpsecret.encode() not in stored_bytes(tmp_path / "data")


async def test_a_wecom_ai_bot_form_is_filled_and_subscribes_at_the_emulator(tmp_path: Path, key):
    """The AI bot's probe checks the settings only (subscribing would take the running account's one long
    connection), so a bad setting is what it can refuse; the secret is checked when the account subscribes."""
    from tests.console.rig import hidden
    from tests.peers.wecom_server import WecomServer

    async with WecomServer(bot_id="aib-quartz", secret="sec-quartz-5531") as server, \
            serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ada")) as ada:
        page = await ada.get("/console/channel-accounts/new/wecom")
        assert 'type="password" name="secret"' in page.text and "智能机器人" in page.text

        async def post(**fields: str) -> httpx.Response:
            return await ada.post("/console/channel-accounts/new/wecom", data={
                "csrf": hidden(page.text, "csrf"), "account": "main", "partner": "algebra", "dm": "open", **fields})

        bad = await post(bot_id="aib-quartz", secret="sec-quartz-5531", ws_url="http://127.0.0.1:9/")
        assert bad.status_code == 400 and "ws_url" in bad.text and "sec-quartz-5531" not in bad.text
        assert await running.gateway.store.stored_accounts() == []
        good = await post(bot_id="aib-quartz", secret="sec-quartz-5531", ws_url=server.url)
        assert good.status_code == 303, good.text
        await server.connected()
        found = await until_running(ada, "wecom:main")
        assert found["partners"] == ["algebra"]
    assert b"sec-quartz-5531" not in stored_bytes(tmp_path / "data")
