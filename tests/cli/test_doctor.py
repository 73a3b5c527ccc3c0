"""`partners doctor`: each problem with its fix, exit 1 on any error."""

from __future__ import annotations

import socket

import pytest

from gateway.configfile import parse_config, validate_account
from gateway.core.errors import ConfigError
from gateway.doctor import Severity, check_data_dir, check_port

GOOD = """\
data_dir: data
http: {port: 0}
partners:
  - {id: tutor, name: Tutor}
channels:
  webchat:
    default: {access: {dm: open}, title: Homework help}
  console:
    default: {}
bindings:
  - {partner: tutor, channel: webchat}
  - {partner: tutor, channel: console}
"""

BAD = """\
partners:
  - {id: tutor, name: Tutor}
  - {id: spare, name: Spare}
channels:
  telegram:
    default: {token: "env:PARTNERS_TEST_NO_SUCH_TOKEN"}
  webchat:
    default: {title: ""}
  msteams:
    default: {}
bindings:
  - {partner: tutor, channel: telegram}
  - {partner: tutor, channel: discord, account: main}
  - {partner: tutor, channel: msteams}
"""


def lines_of(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines()]


@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
def test_a_good_config_passes_with_the_model_warning(invoke, workdir, offline):
    (workdir / "partners.yaml").write_text(GOOD, encoding="utf-8")

    result = invoke("doctor", *(["--offline"] if offline else []))

    assert result.exit_code == 0, result.output
    out = lines_of(result.output)
    assert "ok     config: partners.yaml loads" in out
    assert f"ok     data dir: {workdir / 'data'} will be created (in {workdir}, which is writable)" in out
    assert "ok     http port: port 0: a free port is picked at start" in out
    shown = "channel loads and its settings are valid" if offline else "works: served by the gateway itself, nothing to reach"
    assert f"ok     webchat/default: {shown}" in out
    assert f"ok     console/default: {shown}" in out
    assert any(line.startswith("warn   partner ") and "has no language model configured" in line for line in out)
    assert any("fix: set `model:` in" in line for line in out)
    assert out[-1] == "0 error(s), 1 warning(s)"


def test_the_embedded_default_passes(invoke, workdir):
    result = invoke("doctor")

    assert result.exit_code == 0, result.output
    assert "no config file: using the embedded default" in result.output


def test_a_bad_config_lists_every_problem_with_its_fix(invoke, workdir, monkeypatch):
    monkeypatch.delenv("PARTNERS_TEST_NO_SUCH_TOKEN", raising=False)
    (workdir / "partners.yaml").write_text(BAD, encoding="utf-8")

    result = invoke("doctor")

    assert result.exit_code == 1
    out = result.output
    assert "error  msteams/default: partners.yaml: 2 problems:" in out
    assert "channels.msteams.default.app_id: Field required (fix: add this field)" in out
    assert ("error  telegram/default: partners.yaml:channels.telegram.default.token: "
            "environment variable PARTNERS_TEST_NO_SUCH_TOKEN is not set") in out
    assert "fix: export PARTNERS_TEST_NO_SUCH_TOKEN=... in the gateway's environment before starting it" in out
    assert "error  webchat/default: partners.yaml:channels.webchat.default.title: String should have at least 1 character" in out
    assert "warn   partner spare: has no binding, so no one can reach it" in out
    assert "warn   bindings.1: routes discord/main, which is not under channels:" in out
    assert "warn   webchat/default: no binding routes this account to a partner" in out
    assert lines_of(out)[-1] == "3 error(s), 5 warning(s)"  # both partners also warn: no model


def test_a_config_that_does_not_load_is_the_only_finding(invoke, workdir):
    (workdir / "partners.yaml").write_text("partners: [\n", encoding="utf-8")

    result = invoke("doctor")

    assert result.exit_code == 1
    assert result.output.startswith("error  config: partners.yaml:line 2: not valid YAML")
    assert lines_of(result.output)[-1] == "1 error(s), 0 warning(s)"


def test_a_port_taken_by_another_program_is_an_error():
    with socket.socket() as busy:  # bound, not listening: taken, and no gateway answers there
        busy.bind(("127.0.0.1", 0))
        port = busy.getsockname()[1]
        result = check_port(parse_config({"http": {"port": port}}))

    assert result.severity is Severity.ERROR
    assert result.message == f"127.0.0.1:{port} is in use by another program"
    assert "--port" in result.fix


def test_an_address_this_machine_does_not_have_is_an_error():
    result = check_port(parse_config({"http": {"host": "192.0.2.1", "port": 8780}}))

    assert result.severity is Severity.ERROR
    assert "not an address of this machine" in result.message


def test_a_data_dir_that_is_a_file_is_an_error(tmp_path):
    (tmp_path / "taken").write_text("", encoding="utf-8")

    result = check_data_dir(parse_config({"data_dir": str(tmp_path / "taken" / "data")}))

    assert result.severity is Severity.ERROR
    assert result.message == f"{tmp_path / 'taken'} is not a folder"


def test_an_existing_data_dir_is_checked_by_writing_to_it(tmp_path):
    result = check_data_dir(parse_config({"data_dir": str(tmp_path)}))

    assert result.severity is Severity.OK
    assert result.message == f"{tmp_path} is writable"
    assert list(tmp_path.iterdir()) == []


def test_account_settings_errors_name_the_field_without_the_secret(monkeypatch):
    monkeypatch.setenv("PARTNERS_TEST_TOKEN", "hunter2-secret")
    config = parse_config({"channels": {"webchat": {"default": {"token": "env:PARTNERS_TEST_TOKEN"}}}})
    from channels.webchat import WebchatChannel

    with pytest.raises(ConfigError) as caught:
        validate_account(config, "webchat", "default", WebchatChannel.config_model)

    assert caught.value.field == "channels.webchat.default.token"
    assert "hunter2-secret" not in str(caught.value)


def test_disabled_accounts_are_not_checked(invoke, workdir):
    (workdir / "partners.yaml").write_text(
        "partners: [{id: tutor, name: Tutor}]\n"
        "channels: {webchat: {default: {}}, telegram: {default: {enabled: false, token: env:PARTNERS_TEST_NOT_SET}}}\n"
        "bindings: [{partner: tutor, channel: webchat}]\n",
        encoding="utf-8",
    )

    result = invoke("doctor")

    assert "ok     telegram/default: disabled (enabled: false)" in result.output


# --------------------------------------------------------------------------- probes: does it work, not only its shape


def _closed_port() -> int:
    """A loopback port nothing listens on (bound and released: the kernel refuses connections to it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _telegram(workdir, monkeypatch, token: str, **account) -> None:
    monkeypatch.setenv("PARTNERS_TEST_TG_TOKEN", token)
    settings = {"token": "env:PARTNERS_TEST_TG_TOKEN", **account}
    config = {
        "data_dir": "data", "http": {"port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "channels": {"telegram": {"main": settings}},
        "bindings": [{"partner": "tutor", "channel": "telegram", "account": "main"}],
    }
    import json

    (workdir / "partners.yaml").write_text(json.dumps(config), encoding="utf-8")


def _register(api_url: str, token: str) -> None:
    import httpx

    httpx.post(f"{api_url}/test/bots", json={"token": token}, timeout=30, trust_env=False).raise_for_status()


def _new_token() -> str:
    import random
    import uuid

    return f"{random.randrange(10**8, 10**9)}:{uuid.uuid4().hex}"


@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
@pytest.mark.parametrize("token, expected", [
    ("", "the bot token is empty"),
    ("notatoken", "the token does not look like a bot token"),
])
def test_a_token_that_cannot_be_one_is_an_error_even_offline(invoke, workdir, monkeypatch, token, expected, offline):
    _telegram(workdir, monkeypatch, token)

    result = invoke("doctor", *(["--offline"] if offline else []))

    assert result.exit_code == 1, result.output
    assert f"error  telegram/main: {expected}" in result.output
    assert "fix: " in result.output and "@BotFather" in result.output


def test_a_token_telegram_refuses_is_an_error_with_the_fix(invoke, workdir, monkeypatch, telegram_api):
    token = _new_token()  # well shaped, but no such bot
    _telegram(workdir, monkeypatch, token, api_url=telegram_api)

    result = invoke("doctor")

    assert result.exit_code == 1, result.output
    assert "error  telegram/main: Telegram says the token is invalid (401)" in result.output
    assert "fix: copy it again from @BotFather" in result.output
    assert token not in result.output and token.split(":")[1] not in result.output


def test_a_working_bot_passes_and_names_itself(invoke, workdir, monkeypatch, telegram_api):
    token = _new_token()
    _register(telegram_api, token)
    _telegram(workdir, monkeypatch, token, api_url=telegram_api)

    result = invoke("doctor")

    assert result.exit_code == 0, result.output
    assert "ok     telegram/main: works: bot @" in result.output
    assert f"at {telegram_api}" in result.output
    assert token not in result.output


def test_offline_asks_no_platform(invoke, workdir, monkeypatch, telegram_api):
    _telegram(workdir, monkeypatch, _new_token(), api_url=telegram_api)  # not registered: online, this fails

    result = invoke("doctor", "--offline")

    assert result.exit_code == 0, result.output
    assert "ok     telegram/main: channel loads and its settings are valid" in result.output
    assert "works:" not in result.output


def test_a_closed_api_url_says_nothing_answers_there(invoke, workdir, monkeypatch):
    port = _closed_port()
    _telegram(workdir, monkeypatch, _new_token(), api_url=f"http://127.0.0.1:{port}")

    result = invoke("doctor")

    assert result.exit_code == 1, result.output
    assert f"error  telegram/main: nothing answers at http://127.0.0.1:{port} (connection refused)" in result.output
    assert "fix: check the network; if you run your own Bot API server" in result.output
    assert "ConnectError" not in result.output and "All connection attempts" not in result.output


@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
def test_a_webhook_url_that_is_not_https_is_an_error_even_offline(invoke, workdir, monkeypatch, offline):
    monkeypatch.setenv("PARTNERS_TEST_TG_SECRET", "s3cret-value")
    _telegram(workdir, monkeypatch, _new_token(), mode="webhook", webhook_url="http://tutor.school.org/webhooks/telegram/main",
              webhook_secret="env:PARTNERS_TEST_TG_SECRET")

    result = invoke("doctor", *(["--offline"] if offline else []))

    assert result.exit_code == 1, result.output
    assert ("error  telegram/main: webhook_url http://tutor.school.org/webhooks/telegram/main is not https: "
            "Telegram delivers webhooks only to https:// addresses") in result.output
    assert "s3cret-value" not in result.output


def test_a_webhook_set_to_another_address_is_a_warning(invoke, workdir, monkeypatch, telegram_api):
    import httpx

    token = _new_token()
    _register(telegram_api, token)
    httpx.post(f"{telegram_api}/bot{token}/setWebhook", json={"url": "https://elsewhere.school.org/hook"},
               timeout=30, trust_env=False).raise_for_status()
    monkeypatch.setenv("PARTNERS_TEST_TG_SECRET", "s3cret-value")
    _telegram(workdir, monkeypatch, token, api_url=telegram_api, mode="webhook",
              webhook_url="https://tutor.school.org/webhooks/telegram/main", webhook_secret="env:PARTNERS_TEST_TG_SECRET")

    result = invoke("doctor")

    assert ("warn   telegram/main: Telegram sends this bot's updates to https://elsewhere.school.org/hook, "
            "not to webhook_url") in result.output
    assert "fix: if another program or gateway serves this bot" in result.output


@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
def test_the_readme_placeholder_homeserver_is_an_error_even_offline(invoke, workdir, monkeypatch, offline):
    monkeypatch.setenv("PARTNERS_TEST_MX_TOKEN", "syt_secret_token_value")
    (workdir / "partners.yaml").write_text(
        "partners: [{id: tutor, name: Tutor}]\n"
        "channels:\n"
        "  matrix:\n"
        '    main: {homeserver: "https://YOUR.HS", user_id: "@tutor:YOUR.HS", access_token: env:PARTNERS_TEST_MX_TOKEN,\n'
        "           device_id: PARTNERS}\n"
        "bindings: [{partner: tutor, channel: matrix, account: main}]\n",
        encoding="utf-8",
    )

    result = invoke("doctor", *(["--offline"] if offline else []))

    assert result.exit_code == 1, result.output
    assert "error  matrix/main: homeserver still names the example host YOUR.HS" in result.output
    assert "fix: set homeserver to the client-server API address" in result.output
    assert "syt_secret_token_value" not in result.output


# --------------------------------------------------------------------------- the model probe


def _with_model(workdir, model: dict) -> None:
    import json

    config = {
        "data_dir": "data", "http": {"port": 0},
        "partners": [{"id": "tutor", "name": "Tutor", "model": model}],
        "channels": {"webchat": {"default": {}}},
        "bindings": [{"partner": "tutor", "channel": "webchat"}],
    }
    (workdir / "partners.yaml").write_text(json.dumps(config), encoding="utf-8")


@pytest.fixture(scope="module")
def keyed_stub():
    """The model stub as a process that answers only requests bearing its key."""
    from tests.peers.model_stub import ModelStubProcess

    stub = ModelStubProcess.start(api_key="sk-stub-right-key")
    yield stub
    stub.stop()


def test_a_model_that_answers_passes(invoke, workdir, monkeypatch, keyed_stub):
    monkeypatch.setenv("PARTNERS_TEST_MODEL_KEY", "sk-stub-right-key")
    _with_model(workdir, {"model": "openai/stub-model", "api_base": keyed_stub.api_base, "api_key": "env:PARTNERS_TEST_MODEL_KEY"})

    result = invoke("doctor")

    assert result.exit_code == 0, result.output
    assert "ok     partner tutor: model openai/stub-model answers" in result.output
    request = keyed_stub.requests()[-1]
    assert request["max_tokens"] == 1
    assert "sk-stub-right-key" not in result.output


def test_a_wrong_api_key_is_an_error_without_the_key(invoke, workdir, monkeypatch, keyed_stub):
    monkeypatch.setenv("PARTNERS_TEST_MODEL_KEY", "sk-stub-wrong-key")
    _with_model(workdir, {"model": "openai/stub-model", "api_base": keyed_stub.api_base, "api_key": "env:PARTNERS_TEST_MODEL_KEY"})

    result = invoke("doctor")

    assert result.exit_code == 1, result.output
    assert f"error  partner tutor: {keyed_stub.url} refused the API key for openai/stub-model (401)" in result.output
    assert "fix: check the key in the variable api_key names" in result.output
    assert "sk-stub-wrong-key" not in result.output


def test_a_missing_api_key_is_an_error_with_the_setting_to_add(invoke, workdir, monkeypatch, keyed_stub):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    _with_model(workdir, {"model": "openai/stub-model", "api_base": keyed_stub.api_base})

    result = invoke("doctor")

    assert result.exit_code == 1, result.output
    assert "error  partner tutor: openai/stub-model needs an API key and none is set" in result.output
    assert "fix: add `api_key: env:OPENAI_API_KEY` under model: and export OPENAI_API_KEY=..." in result.output


@pytest.mark.parametrize("model, hint", [
    ("ollama/llama3", "is Ollama running (`ollama serve`)?"),
    ("openai/stub-model", "is the model server running, and is api_base its address?"),
])
def test_a_dead_model_address_says_nothing_answers_there(invoke, workdir, monkeypatch, model, hint):
    monkeypatch.setenv("PARTNERS_TEST_MODEL_KEY", "sk-anything")
    port = _closed_port()
    _with_model(workdir, {"model": model, "api_base": f"http://127.0.0.1:{port}", "api_key": "env:PARTNERS_TEST_MODEL_KEY"})

    result = invoke("doctor")

    assert result.exit_code == 1, result.output
    assert f"error  partner tutor: nothing answers at http://127.0.0.1:{port} (connection refused)" in result.output
    assert f"fix: {hint}" in result.output


def test_a_dead_backup_is_reported_as_the_backup(invoke, workdir, monkeypatch, keyed_stub):
    monkeypatch.setenv("PARTNERS_TEST_MODEL_KEY", "sk-stub-right-key")
    port = _closed_port()
    _with_model(workdir, {"model": "openai/stub-model", "api_base": keyed_stub.api_base, "api_key": "env:PARTNERS_TEST_MODEL_KEY",
                          "backup": {"model": "ollama/llama3", "api_base": f"http://127.0.0.1:{port}"}})

    result = invoke("doctor")

    assert result.exit_code == 1, result.output
    assert f"error  partner tutor: backup ollama/llama3: nothing answers at http://127.0.0.1:{port} (connection refused)" in result.output


# --------------------------------------------------------------------------- bounded, concurrent


def test_a_peer_that_never_answers_is_bounded_by_the_probe_timeout(workdir, monkeypatch):
    from gateway.configfile import load_config
    from gateway.doctor import run_checks

    with socket.socket() as silent:  # accepts connections (the backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        _telegram(workdir, monkeypatch, _new_token(), api_url=f"http://127.0.0.1:{port}")

        results = run_checks(lambda: load_config(workdir / "partners.yaml"), timeout=2)

    [probe] = [r for r in results if r.name == "telegram/main" and r.severity is Severity.ERROR]
    assert probe.message == "no answer within 2 s"


def test_serve_refuses_what_doctor_offline_finds(invoke, workdir, monkeypatch):
    _telegram(workdir, monkeypatch, "")

    result = invoke("serve")

    assert result.exit_code == 2
    assert result.stderr.startswith("error: telegram/main: the bot token is empty")
    assert "(fix: put the token @BotFather gave you in the variable" in result.stderr
    assert "Traceback" not in result.output


def test_polling_a_bot_that_has_a_webhook_warns_that_polling_removes_it(invoke, workdir, monkeypatch, telegram_api):
    import httpx

    token = _new_token()
    _register(telegram_api, token)
    httpx.post(f"{telegram_api}/bot{token}/setWebhook", json={"url": "https://other.school.org/hook"},
               timeout=30, trust_env=False).raise_for_status()
    _telegram(workdir, monkeypatch, token, api_url=telegram_api)

    result = invoke("doctor")

    assert result.exit_code == 0, result.output  # a warning: polling works, and takes the updates over
    assert "warn   telegram/main: this bot has a webhook set (https://other.school.org/hook): polling removes it" in result.output
    info = httpx.get(f"{telegram_api}/bot{token}/getWebhookInfo", timeout=30, trust_env=False).json()["result"]
    assert info["url"] == "https://other.school.org/hook"  # the probe only looked


def test_a_wrong_key_from_the_providers_own_variable_is_refused_not_missing(invoke, workdir, monkeypatch, keyed_stub):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-stub-wrong-key")
    _with_model(workdir, {"model": "openai/stub-model", "api_base": keyed_stub.api_base})

    result = invoke("doctor")

    assert result.exit_code == 1, result.output
    assert f"error  partner tutor: {keyed_stub.url} refused the API key for openai/stub-model (401)" in result.output
    assert "such as OPENAI_API_KEY" in result.output


def test_group_settings_the_platform_cannot_honour_are_warned_about_with_the_fix():
    from gateway.doctor import check_group_reach

    config = parse_config({"channels": {
        "telegram": {"main": {"access": {"group": "always"}}, "quiet": {"access": {"group": "mention"}}},
        "email": {"school": {"access": {"group": "keyword", "keywords": ["tutor"]}}},
        "webchat": {"default": {}},
    }})
    found = {r.name: r for r in check_group_reach(config)}
    assert set(found) == {"telegram/main", "email/school"}
    assert found["telegram/main"].severity is Severity.WARN
    assert "only group messages that mention it" in found["telegram/main"].message
    assert "/setprivacy" in found["telegram/main"].fix
    assert "has no group chats for bots" in found["email/school"].message
