"""`partners doctor`: each problem with its fix, exit 1 on any error."""

from __future__ import annotations

import socket

import pytest

from gateway.config import parse_config
from gateway.config import validate_account
from gateway.doctor import Severity, check_data_dir, check_port
from gateway.errors import ConfigError

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
  zulip:
    default: {}
bindings:
  - {partner: tutor, channel: telegram}
  - {partner: tutor, channel: discord, account: main}
  - {partner: tutor, channel: zulip}
"""


def lines_of(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines()]


def test_a_good_config_passes_with_the_model_warning(invoke, workdir):
    (workdir / "partners.yaml").write_text(GOOD, encoding="utf-8")

    result = invoke("doctor")

    assert result.exit_code == 0, result.output
    out = lines_of(result.output)
    assert "ok     config: partners.yaml loads" in out
    assert f"ok     data dir: {workdir / 'data'} will be created (in {workdir}, which is writable)" in out
    assert "ok     http port: port 0: a free port is picked at start" in out
    assert "ok     webchat/default: channel loads and its settings are valid" in out
    assert "ok     console/default: channel loads and its settings are valid" in out
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
    assert "error  zulip/default: will not run: channel 'zulip' is not implemented in this release yet" in out
    assert "error  telegram/default: partners.yaml:channels.telegram.default.token: environment variable PARTNERS_TEST_NO_SUCH_TOKEN is not set" in out
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
