"""Adding channel accounts in the console, over real HTTP, against the Telegram Bot API emulator.

Ada (a teacher) adds a Telegram bot for her partner ``algebra`` through the guided form: the
channel's own probe asks the emulator ``getMe``; only when it answers is the account stored -- sealed
with ``PARTNERS_SECRET_KEY``, so the token's bytes are nowhere in the SQLite files -- and started,
and a learner at the emulator gets an answer.  A bad token stores nothing; no key refuses with the
fix; a restart runs the account again; a wrong key stops the gateway with one line.
"""

from __future__ import annotations

import uuid
from contextlib import aclosing
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.core.errors import ConfigError
from gateway.secretbox import KEY_ENV, OLD_KEY_ENV, new_key
from tests.channels.telegram.conftest import new_id
from tests.console.rig import Quiet, console_config, csrf_of, hidden, serve_console, signed_in
from tests.contract.harness import eventually
from tests.peers.telegram_peer import TelegramUsers


def new_token() -> str:
    return f"{new_id()}:tok-quartz-{uuid.uuid4().hex}"


def stored_bytes(data_dir: Path) -> bytes:
    """Every byte of the gateway's SQLite files (the database and its write-ahead log)."""
    return b"".join(path.read_bytes() for path in sorted(data_dir.glob("gateway.db*")))


async def add_form(http, telegram_api: str, token: str, *, account: str = "main", partner: str = "algebra"):
    page = await http.get("/console/channel-accounts/new/telegram")
    assert page.status_code == 200
    return await http.post("/console/channel-accounts/new/telegram", data={
        "csrf": hidden(page.text, "csrf"), "account": account, "partner": partner, "token": token,
        "api_url": telegram_api, "poll_timeout": "1", "dm": "open", "drafts": "on"})


async def listed(http) -> dict[str, dict]:
    return {f"{a['channel']}:{a['account']}": a for a in (await http.get("/console/api/channels")).json()["accounts"]}


async def until_running(http, account: str) -> dict:
    async def running():
        found = (await listed(http)).get(account)
        return found if found and found["state"] == "running" else None

    return await eventually(running, what=f"{account} running")


@pytest.fixture
def key(monkeypatch) -> str:
    value = new_key()
    monkeypatch.setenv(KEY_ENV, value)
    monkeypatch.delenv(OLD_KEY_ENV, raising=False)
    return value


async def test_a_good_token_is_probed_stored_sealed_started_and_answers_a_learner(telegram_api, tmp_path: Path, key):
    token = new_token()
    users = TelegramUsers(telegram_api, token)
    await users.register(username="algebra_quartz_bot")
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ada")) as ada:
        form = (await ada.get("/console/channel-accounts/new/telegram")).text
        assert 'type="password" name="token"' in form and "@BotFather" in form
        assert 'value="algebra"' in form and 'value="biology"' not in form  # only her partners
        answer = await add_form(ada, telegram_api, token)
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == "/console/channels?added=telegram:main"
        found = await until_running(ada, "telegram:main")
        assert found["partners"] == ["algebra"] and found["added_in_console"] and found["operable"]
        page = (await ada.get("/console/channels")).text
        assert 'data-account="telegram:main"' in page and token not in page
        assert token not in (await ada.get("/console/api/channels")).text
        chat = new_id()
        await users.say(chat, "hello there")

        async def answered():
            return [m for m in (await users.seen()).get(str(chat), []) if m["text"] == "ok"]

        assert await eventually(answered, what="the partner's answer at the emulator")
        [row] = await running.gateway.store.stored_accounts()
        assert (row.channel, row.account, row.partner, row.created_by) == ("telegram", "main", "algebra", "ada")
        data_dir = tmp_path / "data"
    assert token.encode() not in stored_bytes(data_dir)
    assert token.split(":", 1)[1].encode() not in stored_bytes(data_dir)
    await users.aclose()

    # A restart with the same key runs it again, bound to the same partner.
    async with serve_console(data_dir, with_users=False) as again, aclosing(await signed_in(again.url, "ada")) as ada:
        assert (await until_running(ada, "telegram:main"))["partners"] == ["algebra"]


async def test_a_bad_token_shows_the_probe_reason_and_stores_nothing(telegram_api, tmp_path: Path, key):
    token = new_token()  # never registered at the emulator: getMe answers 401
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ada")) as ada:
        answer = await add_form(ada, telegram_api, token)
        assert answer.status_code == 400
        assert "Telegram says the token is invalid" in answer.text and "@BotFather" in answer.text
        assert token not in answer.text  # the secret is not sent back, not even into the form
        assert await running.gateway.store.stored_accounts() == []
        assert "telegram:main" not in await listed(ada)
        shaped = await add_form(ada, telegram_api, "not-a-token-shape")
        assert shaped.status_code == 400 and "does not look like a bot token" in shaped.text
        assert await running.gateway.store.stored_accounts() == []


async def test_without_the_key_the_form_says_how_to_set_it_and_nothing_is_added(telegram_api, tmp_path: Path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    token = new_token()
    users = TelegramUsers(telegram_api, token)
    await users.register()
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ada")) as ada:
        form = (await ada.get("/console/channel-accounts/new/telegram")).text
        assert 'id="no-key"' in form and KEY_ENV in form and "partners console new-key" in form
        assert 'id="account-form"' not in form
        csrf = await csrf_of(ada)
        answer = await ada.post("/console/api/channel-accounts/telegram", headers={"X-CSRF-Token": csrf}, json={
            "account": "main", "partner": "algebra", "settings": {"token": token, "api_url": telegram_api}})
        assert answer.status_code == 503 and KEY_ENV in answer.json()["problems"][0]["message"]
        assert await running.gateway.store.stored_accounts() == []
    await users.aclose()


async def test_a_store_with_sealed_accounts_needs_the_right_key_to_start(telegram_api, tmp_path: Path, key, monkeypatch):
    token = new_token()
    users = TelegramUsers(telegram_api, token)
    await users.register()
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "root")) as root:
        csrf = await csrf_of(root)
        answer = await root.post("/console/api/channel-accounts/telegram", headers={"X-CSRF-Token": csrf}, json={
            "account": "main", "partner": "biology", "settings": {"token": token, "api_url": telegram_api}})
        assert answer.status_code == 201 and answer.json()["added"], answer.text
        assert answer.json()["checked"].startswith("bot @")
    await users.aclose()
    config = console_config(tmp_path / "data")

    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ConfigError) as unset:
        await Gateway(config, responder=Quiet()).start()
    assert KEY_ENV in str(unset.value) and "\n" not in str(unset.value)

    monkeypatch.setenv(KEY_ENV, new_key())
    with pytest.raises(ConfigError) as wrong:
        await Gateway(config, responder=Quiet()).start()
    assert f"{KEY_ENV} does not open" in str(wrong.value) and "\n" not in str(wrong.value)

    # Rotation: the new key in PARTNERS_SECRET_KEY, the old one beside it; the start seals everything anew.
    rotated = new_key()
    monkeypatch.setenv(KEY_ENV, rotated)
    monkeypatch.setenv(OLD_KEY_ENV, key)
    async with Gateway(config, responder=Quiet()) as gateway:
        assert gateway.channel("telegram", "main") is not None, gateway.unavailable
    monkeypatch.delenv(OLD_KEY_ENV)
    async with Gateway(config, responder=Quiet()) as gateway:
        assert gateway.channel("telegram", "main") is not None, gateway.unavailable


async def test_teachers_add_only_for_their_partners_and_delete_only_their_accounts(telegram_api, tmp_path: Path, key):
    token = new_token()
    users = TelegramUsers(telegram_api, token)
    await users.register()
    async with serve_console(tmp_path / "data") as running:
        async with aclosing(await signed_in(running.url, "ben")) as ben:
            refused = await add_form(ben, telegram_api, token, partner="algebra")  # Ada's partner
            assert refused.status_code == 404 and await running.gateway.store.stored_accounts() == []
        async with aclosing(await signed_in(running.url, "ada")) as ada:
            assert (await add_form(ada, telegram_api, token)).status_code == 303
            await until_running(ada, "telegram:main")
            taken = await add_form(ada, telegram_api, token)
            assert taken.status_code == 409 and "already a telegram account named main" in taken.text
        async with aclosing(await signed_in(running.url, "ben")) as ben:
            assert "telegram:main" not in await listed(ben)
            csrf = await csrf_of(ben)
            assert (await ben.delete("/console/api/channel-accounts/telegram/main",
                                     headers={"X-CSRF-Token": csrf})).status_code == 404
        async with aclosing(await signed_in(running.url, "ada")) as ada:
            csrf = await csrf_of(ada)
            gone = await ada.post("/console/channel-accounts/telegram/main/delete", data={"csrf": csrf})
            assert gone.status_code == 303
            assert "telegram:main" not in await listed(ada)
            assert running.gateway.channel("telegram", "main") is None
            assert await running.gateway.store.stored_accounts() == []
    await users.aclose()


async def test_a_slack_app_shows_the_manifest_and_is_probed_with_auth_test(slack_api, tmp_path: Path, key):
    from tests.peers.slack_peer import SlackUsers

    users = SlackUsers(slack_api)
    await users.register()
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ben")) as ben:
        form = (await ben.get("/console/channel-accounts/new/slack")).text
        assert 'id="manifest"' in form and "socket_mode_enabled: true" in form and "app_mentions:read" in form
        assert 'type="password" name="bot_token"' in form and 'type="password" name="app_token"' in form
        csrf = await csrf_of(ben)

        async def add(bot_token: str):
            return await ben.post("/console/api/channel-accounts/slack", headers={"X-CSRF-Token": csrf}, json={
                "account": "school", "partner": "biology",
                "settings": {"bot_token": bot_token, "app_token": users.app_token, "api_base": f"{slack_api}/api/"}})

        bad = await add(f"xoxb-{uuid.uuid4().hex}")  # no such app at the emulator
        assert bad.status_code == 400 and not bad.json()["added"]
        assert bad.json()["problems"][0]["message"].startswith("Slack refuses the bot token")
        assert await running.gateway.store.stored_accounts() == []
        good = await add(users.token)
        assert good.status_code == 201, good.text
        found = await until_running(ben, "slack:school")
        assert found["partners"] == ["biology"] and found["added_in_console"]
    assert users.token.encode() not in stored_bytes(tmp_path / "data")
    await users.aclose()


async def test_personal_wechat_is_saved_then_links_its_login_qr_code_and_runs_after_the_scan(tmp_path: Path, key):
    from tests.peers.weixin_ilink_server import IlinkPeer, serving

    peer = IlinkPeer()
    async with serving(peer) as base, serve_console(tmp_path / "data") as running, \
            aclosing(await signed_in(running.url, "ada")) as ada:
        form = (await ada.get("/console/channel-accounts/new/weixin")).text
        assert 'type="password"' not in form and "scan" in form.lower()
        page = await ada.get("/console/channel-accounts/new/weixin")
        answer = await ada.post("/console/channel-accounts/new/weixin", data={
            "csrf": hidden(page.text, "csrf"), "account": "school", "partner": "algebra", "base_url": base,
            "cdn_base_url": base + "c2c/", "dm": "open"})
        assert answer.status_code == 303, answer.text

        async def waiting():
            found = (await listed(ada)).get("weixin:school")
            return found if found and found["state"] == "action_required" and found["login"] else None

        found = await eventually(waiting, what="the account waiting for its QR login")
        assert found["login"].startswith("/channels/weixin/school/login?t=")
        assert found["login"] in (await ada.get("/console/channels")).text.replace("&amp;", "&")

        async def shown():
            answer = await ada.get(found["login"])
            return answer.text if "<svg" in answer.text else None

        await eventually(shown, what="the QR code on the login page")
        await eventually(lambda: "wait" in peer.answered, what="the page's login to ask for the status")
        await peer.scan()
        await peer.confirm()
        assert (await until_running(ada, "weixin:school"))["login"] is None


@pytest.mark.parametrize("given", ["unset", "wrong", "not a key"])
def test_serve_stops_with_one_line_naming_the_variable_when_the_key_cannot_open_the_store(tmp_path: Path, monkeypatch, given):
    import asyncio

    from click.testing import CliRunner

    from gateway.accounts import seal
    from gateway.cli import cli
    from gateway.secretbox import SecretBox
    from gateway.store.accounts import StoredAccount
    from gateway.store.sqlite import SqliteStore

    data = tmp_path / "data"

    async def seed() -> None:
        store = SqliteStore(data / "gateway.db")
        await store.open()
        sealed = seal(SecretBox(new_key()), {"token": new_token()})
        assert await store.add_stored_account(StoredAccount("telegram", "main", "algebra", sealed, "root", 0.0))
        await store.close()

    asyncio.run(seed())
    (tmp_path / "partners.yaml").write_text(
        f"data_dir: {data}\nhttp: {{port: 0}}\npartners:\n  - {{id: algebra, name: Algebra}}\n", encoding="utf-8")
    monkeypatch.delenv("PARTNERS_CONFIG", raising=False)
    monkeypatch.delenv(OLD_KEY_ENV, raising=False)
    if given == "unset":
        monkeypatch.delenv(KEY_ENV, raising=False)
    else:
        monkeypatch.setenv(KEY_ENV, new_key() if given == "wrong" else "not-a-key-quartz")
    result = CliRunner().invoke(cli, ["serve", "-c", str(tmp_path / "partners.yaml")], prog_name="partners")
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert KEY_ENV in line and "(fix: " in line
    assert {"unset": "is not set", "wrong": "does not open", "not a key": "is not a secret key"}[given] in line


async def test_secrets_are_shown_as_set_and_replaced_only_by_ones_that_pass_the_probe(telegram_api, tmp_path: Path, key):
    first, second = new_token(), new_token()
    old_bot, new_bot = TelegramUsers(telegram_api, first), TelegramUsers(telegram_api, second)
    await old_bot.register()
    await new_bot.register()
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ada")) as ada:
        assert (await add_form(ada, telegram_api, first)).status_code == 303
        await until_running(ada, "telegram:main")
        page = await ada.get("/console/channel-accounts/telegram/main/secrets")
        assert page.status_code == 200 and first not in page.text
        assert '<span class="state" data-secret="token">set</span>' in page.text
        assert '<span class="state" data-secret="webhook_secret">not set</span>' in page.text
        sealed_before = (await running.gateway.store.stored_accounts())[0].sealed

        refused = await ada.post("/console/channel-accounts/telegram/main/secrets",
                                 data={"csrf": hidden(page.text, "csrf"), "token": new_token()})  # no such bot
        assert refused.status_code == 400 and "Telegram says the token is invalid" in refused.text
        assert (await running.gateway.store.stored_accounts())[0].sealed == sealed_before
        assert (await until_running(ada, "telegram:main"))["restarts"] == 0  # the old token still runs

        csrf = await csrf_of(ada)
        done = await ada.put("/console/api/channel-accounts/telegram/main/secrets", headers={"X-CSRF-Token": csrf},
                             json={"secrets": {"token": second}})
        assert done.status_code == 200 and done.json()["replaced"], done.text
        assert (await ada.put("/console/api/channel-accounts/telegram/main/secrets", headers={"X-CSRF-Token": csrf},
                              json={"secrets": {"api_url": "http://127.0.0.1:9"}})).status_code == 400  # not a secret
        await until_running(ada, "telegram:main")
        chat = new_id()
        await new_bot.say(chat, "hello again")

        async def answered():
            return [m for m in (await new_bot.seen()).get(str(chat), []) if m["text"] == "ok"]

        assert await eventually(answered, what="the answer from the bot with the new token")
    assert second.encode() not in stored_bytes(tmp_path / "data")
    await old_bot.aclose()
    await new_bot.aclose()


def test_new_key_prints_a_key_the_box_takes_and_a_bad_old_key_is_named(tmp_path: Path):
    from click.testing import CliRunner
    from cryptography.fernet import Fernet

    from gateway.cli import cli
    from gateway.secretbox import SecretBox

    result = CliRunner().invoke(cli, ["console", "new-key"], prog_name="partners")
    assert result.exit_code == 0, result.output
    made = result.stdout.strip()
    assert len(made) == 44 and KEY_ENV in result.stderr
    sealed = Fernet(made.encode()).encrypt(b"tok-quartz-5531")  # the printed key is a Fernet key (kept unregistered:
    # a SecretBox would hand it to the scrubber, and the scanner would rightly call the CLI's own output a leak)
    other = new_key()
    box = SecretBox.from_env({KEY_ENV: other, OLD_KEY_ENV: other})
    assert box is not None and box.open(box.seal(b"tok-quartz-5531"), what="a test value") == b"tok-quartz-5531"
    with pytest.raises(ConfigError):
        box.open(sealed, what="a test value")
    assert SecretBox.from_env({KEY_ENV: "  "}) is None
    with pytest.raises(ConfigError) as bad_old:
        SecretBox.from_env({KEY_ENV: other, OLD_KEY_ENV: "short-quartz"})
    assert OLD_KEY_ENV in str(bad_old.value) and "partners console new-key" in str(bad_old.value)


async def test_a_file_account_of_the_same_name_wins_and_the_console_one_is_listed_with_the_reason(
        telegram_api, tmp_path: Path, key, monkeypatch):
    from gateway.configfile import parse_config
    from tests.e2e.rig import served

    made, filed = new_token(), new_token()
    for token in (made, filed):
        async with aclosing(TelegramUsers(telegram_api, token)) as bot:
            await bot.register()
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ada")) as ada:
        assert (await add_form(ada, telegram_api, made)).status_code == 303
    monkeypatch.setenv("TELEGRAM_FILE_TOKEN_QUARTZ", filed)
    raw = console_config(tmp_path / "data").model_dump(mode="json", exclude={"source"})
    raw["channels"] = {"telegram": {"main": {"token": "env:TELEGRAM_FILE_TOKEN_QUARTZ", "api_url": telegram_api,
                                             "poll_timeout": 1}}}
    raw["bindings"] = [{"partner": "geometry", "channel": "telegram", "account": "main"}]
    async with Gateway(parse_config(raw), responder=Quiet()) as gateway, served(gateway) as url, \
            aclosing(await signed_in(url, "root")) as root:

        async def rows() -> list[dict]:
            return [a for a in (await root.get("/console/api/channels")).json()["accounts"]
                    if (a["channel"], a["account"]) == ("telegram", "main")]

        [clash] = gateway.unavailable
        assert (clash.channel, clash.account) == ("telegram", "main") and "partners.yaml has an account" in clash.reason
        await eventually(lambda: _running_row(rows), what="the file's account running")
        [shadowed] = [a for a in await rows() if a["state"] == "unavailable"]
        assert shadowed["added_in_console"] and shadowed["operable"] and "partners.yaml" in shadowed["reason"]
        assert shadowed["partners"] == ["algebra"] and (await _running_row(rows))["partners"] == ["geometry"]
        async with aclosing(await signed_in(url, "ada")) as ada, aclosing(await signed_in(url, "ben")) as ben:
            assert [a["state"] for a in (await ada.get("/console/api/channels")).json()["accounts"]] == [
                "running", "unavailable"]  # her file account (geometry) and her shadowed one (algebra)
            assert (await ben.get("/console/api/channels")).json()["accounts"] == []
            ben_csrf = await csrf_of(ben)
            assert (await ben.delete("/console/api/channel-accounts/telegram/main",
                                     headers={"X-CSRF-Token": ben_csrf})).status_code == 404
        csrf = await csrf_of(root)
        assert (await root.delete("/console/api/channel-accounts/telegram/main", headers={"X-CSRF-Token": csrf})).status_code == 200
        assert gateway.unavailable == [] and await gateway.store.stored_accounts() == []
        [left] = await rows()
        assert left["state"] == "running" and left["partners"] == ["geometry"] and not left["added_in_console"]
        assert (await root.delete("/console/api/channel-accounts/telegram/main",
                                  headers={"X-CSRF-Token": csrf})).status_code == 409  # a file account


async def _running_row(rows) -> dict | None:
    return next((a for a in await rows() if a["state"] == "running"), None)


async def test_an_account_whose_partner_left_the_file_waits_unavailable_for_an_administrator(telegram_api, tmp_path: Path, key):
    from gateway.configfile import parse_config
    from tests.e2e.rig import served

    token = new_token()
    async with aclosing(TelegramUsers(telegram_api, token)) as bot:
        await bot.register()
    async with serve_console(tmp_path / "data") as running, aclosing(await signed_in(running.url, "ben")) as ben:
        csrf = await csrf_of(ben)
        assert (await ben.post("/console/api/channel-accounts/telegram", headers={"X-CSRF-Token": csrf}, json={
            "account": "bio", "partner": "biology", "settings": {"token": token, "api_url": telegram_api}})).status_code == 201
    raw = console_config(tmp_path / "data").model_dump(mode="json", exclude={"source"})
    raw["partners"] = [p for p in raw["partners"] if p["id"] != "biology"]
    async with Gateway(parse_config(raw), responder=Quiet()) as gateway, served(gateway) as url, \
            aclosing(await signed_in(url, "root")) as root:
        assert gateway.channel("telegram", "bio") is None
        [row] = (await root.get("/console/api/channels")).json()["accounts"]
        assert row["state"] == "unavailable" and "biology is no longer in partners.yaml" in row["reason"]
        assert row["partners"] == ["biology"] and row["operable"]
        csrf = await csrf_of(root)
        assert (await root.delete("/console/api/channel-accounts/telegram/bio", headers={"X-CSRF-Token": csrf})).status_code == 200
        assert (await root.get("/console/api/channels")).json()["accounts"] == []
