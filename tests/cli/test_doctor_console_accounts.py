"""`partners doctor` checks the accounts added in the console too, as serve would open them (ADR 0040).

They are sealed in ``gateway.db``; with ``PARTNERS_SECRET_KEY`` doctor opens each, validates it with
its channel's model and probes it (here against the Telegram Bot API emulator), naming it
``channel/account (console)``; without the key it says they exist and cannot be checked.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.accounts import seal
from gateway.secretbox import KEY_ENV, OLD_KEY_ENV, SecretBox, new_key
from gateway.store.accounts import StoredAccount
from gateway.store.sqlite import SqliteStore
from tests.cli.test_doctor import GOOD, lines_of
from tests.console.test_channel_accounts import new_token
from tests.peers.telegram_peer import TelegramUsers


def seed(data: Path, key: str, accounts: dict[str, dict], partner: str = "tutor") -> None:
    async def run() -> None:
        store = SqliteStore(data / "gateway.db")
        await store.open()
        for account, settings in accounts.items():
            sealed = seal(SecretBox(key), settings)
            assert await store.add_stored_account(StoredAccount("telegram", account, partner, sealed, "root", 0.0))
        await store.close()

    asyncio.run(run())


@pytest.fixture
def seeded(workdir: Path, telegram_api: str, monkeypatch) -> tuple[str, str, str]:
    """Two console accounts, one with a bot the emulator knows and one with a token it refuses; the key set."""
    good, bad = new_token(), new_token()

    async def register() -> None:
        users = TelegramUsers(telegram_api, good)
        await users.register(username="doctor_quartz_bot")
        await users.aclose()

    asyncio.run(register())
    key = new_key()
    seed(workdir / "data", key, {"good": {"token": good, "api_url": telegram_api},
                                 "bad": {"token": bad, "api_url": telegram_api}})
    (workdir / "partners.yaml").write_text(GOOD, encoding="utf-8")
    monkeypatch.setenv(KEY_ENV, key)
    monkeypatch.delenv(OLD_KEY_ENV, raising=False)
    return key, good, bad


def test_with_the_key_each_console_account_is_probed_and_named(invoke, seeded):
    _, good, bad = seeded

    result = invoke("doctor")

    assert result.exit_code == 1, result.output
    out = lines_of(result.output)
    assert any(line.startswith("ok     telegram/good (console): works: bot @doctor_quartz_bot at ") for line in out), out
    [refused] = [line for line in out if line.startswith("error  telegram/bad (console): ")]
    assert "Telegram says the token is invalid" in refused
    assert good not in result.output and bad not in result.output
    assert good.split(":", 1)[1] not in result.output


def test_offline_the_console_accounts_are_validated_not_probed(invoke, seeded):
    result = invoke("doctor", "--offline")

    out = lines_of(result.output)
    assert "ok     telegram/good (console): channel loads and its settings are valid" in out, result.output
    assert "ok     telegram/bad (console): channel loads and its settings are valid" in out


def test_without_the_key_doctor_says_they_exist_and_cannot_be_checked(invoke, seeded, monkeypatch):
    monkeypatch.delenv(KEY_ENV)

    result = invoke("doctor", "--offline")

    assert result.exit_code == 1, result.output
    out = lines_of(result.output)
    [line] = [line for line in out if line.startswith("error  console accounts: ")]
    assert "2 account(s) added in the console (telegram/bad, telegram/good) cannot be checked" in line
    assert KEY_ENV in line
    assert not any("(console):" in line for line in out)


def test_a_key_that_does_not_open_them_is_named_per_account(invoke, seeded, monkeypatch):
    monkeypatch.setenv(KEY_ENV, new_key())

    result = invoke("doctor", "--offline")

    assert result.exit_code == 1, result.output
    out = lines_of(result.output)
    for account in ("good", "bad"):
        [line] = [line for line in out if line.startswith(f"error  telegram/{account} (console): ")]
        assert f"{KEY_ENV} does not open" in line


def test_serve_preflight_warns_about_a_console_account_that_cannot_run_and_goes_on(workdir, telegram_api, monkeypatch,
                                                                                    capsys):
    from gateway.cli.serve import _preflight
    from gateway.configfile import load_config

    key = new_key()
    seed(workdir / "data", key, {"orphan": {"token": new_token(), "api_url": telegram_api}}, partner="gone")
    (workdir / "partners.yaml").write_text(GOOD, encoding="utf-8")
    monkeypatch.setenv(KEY_ENV, key)
    monkeypatch.delenv(OLD_KEY_ENV, raising=False)

    _preflight(load_config(workdir / "partners.yaml"))

    [line] = [line for line in capsys.readouterr().err.splitlines() if "(console)" in line]
    assert line.startswith("warning: telegram/orphan (console): does not run: its partner gone is no longer in")
