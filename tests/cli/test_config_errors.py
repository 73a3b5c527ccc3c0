"""A broken config ends a command with exit 2 and one line naming file, field and fix.

Never a traceback, never a secret's value.
"""

from __future__ import annotations

import pytest

SECRET = "sk-this-value-must-never-be-printed"


def write(workdir, text: str) -> None:
    (workdir / "partners.yaml").write_text(text, encoding="utf-8")


def assert_config_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not an escaped exception
    assert "Traceback" not in result.output
    line = result.stderr.strip()
    assert line.startswith("error: partners.yaml:"), line
    assert "(fix: " in line
    for fragment in fragments:
        assert fragment in line, line
    assert SECRET not in result.output


def test_an_unknown_field_is_named_with_its_place_and_fix(invoke, workdir):
    write(workdir, "partners:\n  - id: tutor\n    name: Tutor\n    colour: blue\n")

    result = invoke("serve")

    assert_config_error(result, "partners.0.colour", "Extra inputs are not permitted", "remove this field or check its spelling")


def test_bad_yaml_names_the_line(invoke, workdir):
    write(workdir, "http:\n  port: 8780\n partners: [\n")

    result = invoke("serve")

    assert_config_error(result, "line 3", "not valid YAML")


def test_a_missing_environment_secret_names_the_variable_and_how_to_set_it(invoke, workdir, monkeypatch):
    monkeypatch.delenv("PARTNERS_TEST_UNSET_TOKEN", raising=False)
    write(workdir, "channels:\n  telegram:\n    default:\n      token: env:PARTNERS_TEST_UNSET_TOKEN\n")

    result = invoke("serve")

    assert_config_error(
        result, "channels.telegram.default.token", "environment variable PARTNERS_TEST_UNSET_TOKEN is not set",
        "export PARTNERS_TEST_UNSET_TOKEN=",
    )


def test_a_bad_setting_next_to_a_secret_does_not_echo_the_secret(invoke, workdir, monkeypatch):
    monkeypatch.setenv("PARTNERS_TEST_TOKEN", SECRET)
    write(workdir, "channels:\n  telegram:\n    default:\n      token: env:PARTNERS_TEST_TOKEN\n      access: {dm: sometimes}\n")

    result = invoke("serve")

    assert_config_error(result, "channels.telegram.default.access.dm")


def test_a_secret_written_into_the_file_is_refused_without_being_echoed(invoke, workdir):
    write(workdir, f"channels:\n  webchat:\n    default:\n      token: {SECRET}\n")

    result = invoke("serve")

    assert_config_error(result, "channels.webchat.default.token")


def test_a_named_file_that_does_not_exist_says_how_to_make_one(invoke, workdir):
    result = invoke("-c", "missing.yaml", "serve")

    assert result.exit_code == 2
    assert result.stderr.strip() == "error: missing.yaml: file not found (fix: run `partners init` to write one)"


def test_the_config_file_can_come_from_the_environment(invoke, workdir, monkeypatch):
    (workdir / "from-env.yaml").write_text("bogus: 1\n", encoding="utf-8")
    monkeypatch.setenv("PARTNERS_CONFIG", "from-env.yaml")

    result = invoke("serve")

    assert result.exit_code == 2
    assert result.stderr.startswith("error: from-env.yaml:bogus:")


@pytest.mark.parametrize("command", [("chat",), ("status",), ("pairing", "list")])
def test_every_command_reports_config_errors_the_same_way(invoke, workdir, command):
    write(workdir, "partners:\n  - id: tutor\n    name: Tutor\n    colour: blue\n")

    result = invoke(*command)

    assert_config_error(result, "partners.0.colour")
