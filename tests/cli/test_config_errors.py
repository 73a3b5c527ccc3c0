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


# --------------------------------------------------------------------------- every problem at once, with suggestions


def problem_lines(result) -> list[str]:
    """The indented lines under ``error: FILE: N problems:``."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    head, *lines = result.stderr.strip().splitlines()
    assert head == f"error: partners.yaml: {len(lines)} problems:", result.stderr
    return [line.strip() for line in lines]


def test_every_problem_of_the_file_is_listed_at_once(invoke, workdir):
    write(workdir, "http:\n  port: 99999\npartners:\n  - id: tutor\n    name: Tutor\n    colour: blue\n"
                   "pipeline:\n  coalesce_window_s: -1\n")

    lines = problem_lines(invoke("serve"))

    assert [line.split(":", 1)[0] for line in lines] == ["http.port", "partners.0.colour", "pipeline.coalesce_window_s"]
    assert "less than or equal to 65535" in lines[0]
    assert "(fix: remove this field or check its spelling)" in lines[1]


def test_a_misspelt_key_gets_the_nearest_field_name(invoke, workdir):
    write(workdir, "http:\n  prot: 8780\npartners:\n  - id: tutor\n    nmae: Tutor\n")

    lines = problem_lines(invoke("serve"))

    assert "http.prot: Extra inputs are not permitted (fix: did you mean `port`? Otherwise remove this field)" in lines
    assert "partners.0.nmae: Extra inputs are not permitted (fix: did you mean `name`? Otherwise remove this field)" in lines
    assert "partners.0.name: Field required (fix: add this field)" in lines


def test_a_misspelt_key_of_a_channel_account_gets_the_nearest_field_name(invoke, workdir, monkeypatch):
    monkeypatch.setenv("PARTNERS_TEST_TOKEN", SECRET)
    write(workdir, "channels:\n  telegram:\n    default:\n      token: env:PARTNERS_TEST_TOKEN\n      mdoe: webhook\n")

    result = invoke("serve")

    assert_config_error(result, "channels.telegram.default.mdoe", "did you mean `mode`?")


def test_every_problem_of_an_account_is_listed_with_its_own_field(invoke, workdir, monkeypatch):
    monkeypatch.delenv("PARTNERS_TEST_UNSET_TOKEN", raising=False)
    write(workdir, "channels:\n  email:\n    inbox:\n      address: tutor@school.org\n"
                   "      password: env:PARTNERS_TEST_UNSET_TOKEN\n      imap_host: imap.school.org\n"
                   "      imap_security: none\n      smtp_host: smtp.school.org\n      smtp_prot: 587\n")

    lines = problem_lines(invoke("serve"))

    assert lines[0] == ("channels.email.inbox.password: environment variable PARTNERS_TEST_UNSET_TOKEN is not set "
                        "(fix: export PARTNERS_TEST_UNSET_TOKEN=... in the gateway's environment before starting it)")
    assert lines[1].startswith("channels.email.inbox.imap_security: imap_security none sends the password in clear text; use tls for")
    assert lines[2].startswith("channels.email.inbox.smtp_prot: Extra inputs are not permitted (fix: did you mean `smtp_port`?")


def test_a_check_of_the_whole_account_leaves_no_dangling_dot(invoke, workdir, monkeypatch):
    monkeypatch.setenv("PARTNERS_TEST_TOKEN", SECRET)
    write(workdir, "channels:\n  email:\n    inbox:\n      address: tutor@school.org\n      password: env:PARTNERS_TEST_TOKEN\n"
                   "      imap_host: imap.school.org\n      smtp_host: smtp.school.org\n      smtp_security: none\n")

    result = invoke("serve")

    assert_config_error(result, "channels.email.inbox.smtp_security: smtp_security none sends the password in clear text",
                        "use starttls (port 587) or tls (port 465) for smtp.school.org")
    assert ".:" not in result.stderr


def test_imap_starttls_is_refused_with_the_reason_and_never_advised(invoke, workdir, monkeypatch):
    monkeypatch.setenv("PARTNERS_TEST_TOKEN", SECRET)
    account = ("channels:\n  email:\n    inbox:\n      address: tutor@school.org\n      password: env:PARTNERS_TEST_TOKEN\n"
               "      imap_host: imap.school.org\n      smtp_host: smtp.school.org\n")
    write(workdir, account + "      imap_security: starttls\n")

    starttls = invoke("serve")
    write(workdir, account + "      imap_security: none\n")
    clear = invoke("serve")

    assert_config_error(starttls, "channels.email.inbox.imap_security: IMAP with STARTTLS is not supported",
                        "use imap_security: tls with imap_port: 993")
    assert_config_error(clear, "channels.email.inbox.imap_security", "use tls for imap.school.org")
    assert "starttls" not in clear.stderr.lower()


# --------------------------------------------------------------------------- --config after the command


BAD = "bogus: 1\n"
CONFIG_READERS = [
    ("serve",), ("chat",), ("status",), ("pairing", "list"), ("pairing", "approve", "ABCD1234"),
    ("kb", "list", "study-buddy"), ("memory", "show", "--partner", "study-buddy", "--notes"),
    ("people", "list"), ("conversations", "list"), ("init",),
]


@pytest.mark.parametrize("command", CONFIG_READERS, ids=" ".join)
def test_config_after_the_command_is_the_config_it_reads(invoke, workdir, command):
    (workdir / "other.yaml").write_text(BAD, encoding="utf-8")

    result = invoke(*command, "--config", "other.yaml")

    if command == ("init",):  # init writes the file it is given, and refuses to overwrite it
        assert result.exit_code == 1 and "other.yaml already exists" in result.stderr
        return
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: other.yaml:bogus: Extra inputs are not permitted"), result.stderr


def test_doctor_checks_the_config_given_after_it(invoke, workdir):
    (workdir / "other.yaml").write_text(BAD, encoding="utf-8")

    result = invoke("doctor", "-c", "other.yaml")

    assert result.exit_code == 1
    assert "error  config: other.yaml:bogus: Extra inputs are not permitted" in result.stdout


def test_config_after_the_command_wins_over_one_before_it_and_the_environment(invoke, workdir, monkeypatch):
    (workdir / "other.yaml").write_text(BAD, encoding="utf-8")
    monkeypatch.setenv("PARTNERS_CONFIG", "missing-from-env.yaml")

    result = invoke("-c", "missing.yaml", "pairing", "list", "-c", "other.yaml")

    assert result.exit_code == 2
    assert result.stderr.startswith("error: other.yaml:bogus:")


# --------------------------------------------------------------------------- read-only commands need no secret


NEEDS_A_KEY = (
    "data_dir: data\nhttp: {port: 1}\npartners:\n  - id: tutor\n    name: Tutor\n"
    "    model: {model: openai/gpt-4o-mini, api_key: env:PARTNERS_TEST_UNSET_KEY}\n"
)


@pytest.mark.parametrize("command, output", [
    (("pairing", "list"), "No pairing codes are waiting."),
    (("kb", "list", "tutor"), "tutor has no documents yet"),
    (("people", "list"), "No one has talked to a partner yet."),
    (("conversations", "list"), "No conversations yet."),
    (("memory", "show", "--partner", "tutor", "--notes"), "Nothing is remembered here."),
], ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_read_only_commands_run_without_the_model_key(invoke, workdir, monkeypatch, command, output):
    monkeypatch.delenv("PARTNERS_TEST_UNSET_KEY", raising=False)
    write(workdir, NEEDS_A_KEY)

    result = invoke(*command)

    assert result.exit_code == 0, result.output
    assert output in result.stdout


def test_status_reads_the_address_without_the_model_key(invoke, workdir, monkeypatch):
    monkeypatch.delenv("PARTNERS_TEST_UNSET_KEY", raising=False)
    write(workdir, NEEDS_A_KEY)

    result = invoke("status")

    assert result.exit_code == 1  # nothing runs on port 1: the config loaded, the gateway is what is missing
    assert result.stderr.startswith("No Partners Gateway is answering at http://127.0.0.1:1")


@pytest.mark.parametrize("command", [("serve",), ("chat",)])
def test_commands_that_use_the_model_still_need_its_key(invoke, workdir, monkeypatch, command):
    monkeypatch.delenv("PARTNERS_TEST_UNSET_KEY", raising=False)
    write(workdir, NEEDS_A_KEY)

    result = invoke(*command)

    assert_config_error(result, "partners.0.model.api_key: environment variable PARTNERS_TEST_UNSET_KEY is not set",
                        "export PARTNERS_TEST_UNSET_KEY=")


def test_doctor_still_reports_the_missing_model_key(invoke, workdir, monkeypatch):
    monkeypatch.delenv("PARTNERS_TEST_UNSET_KEY", raising=False)
    write(workdir, NEEDS_A_KEY)

    result = invoke("doctor")

    assert result.exit_code == 1
    assert "partners.0.model.api_key: environment variable PARTNERS_TEST_UNSET_KEY is not set" in result.stdout


def test_a_deferred_secret_fails_clearly_when_it_is_used(monkeypatch, tmp_path):
    from gateway.configfile import load_config
    from gateway.core.config import Secrets
    from gateway.core.errors import ConfigError

    monkeypatch.delenv("PARTNERS_TEST_UNSET_KEY", raising=False)
    (tmp_path / "partners.yaml").write_text(NEEDS_A_KEY, encoding="utf-8")
    key = load_config(tmp_path / "partners.yaml", secrets=Secrets.DEFER).partners[0].model.api_key

    with pytest.raises(ConfigError, match="environment variable PARTNERS_TEST_UNSET_KEY is not set") as caught:
        key.get_secret_value()
    assert "export PARTNERS_TEST_UNSET_KEY=" in str(caught.value)
    assert "PARTNERS_TEST_UNSET_KEY" in repr(key) and "not set" in str(key)


def keyed_persona(workdir) -> None:
    """A persona next to the config whose model's key comes from an unset variable."""
    from personas.loader import PACKAGED_DIR

    folder = workdir / "personas" / "keyed"
    folder.mkdir(parents=True)
    (folder / "SOUL.md").write_text((PACKAGED_DIR / "study-buddy" / "SOUL.md").read_text(), encoding="utf-8")
    (folder / "notes").mkdir()
    (folder / "notes" / "osmosis.md").write_text("# Osmosis\n\nOsmosis moves water across a membrane.\n", encoding="utf-8")
    (folder / "persona.yaml").write_text(
        "name: Keyed\nmodel: {model: openai/gpt-4o-mini, api_key: env:PARTNERS_TEST_UNSET_KEY}\n", encoding="utf-8")
    write(workdir, "data_dir: data\npartners:\n  - {id: tutor, name: Tutor, persona: keyed}\n")


def test_kb_search_reads_a_personas_notes_without_its_model_key(invoke, workdir, monkeypatch):
    monkeypatch.delenv("PARTNERS_TEST_UNSET_KEY", raising=False)
    keyed_persona(workdir)

    result = invoke("kb", "search", "tutor", "osmosis")

    assert result.exit_code == 0, result.output
    assert "Osmosis moves water across a membrane." in result.stdout
    assert "not set" not in result.output


def test_serve_still_stops_on_a_personas_missing_model_key(invoke, workdir, monkeypatch):
    monkeypatch.delenv("PARTNERS_TEST_UNSET_KEY", raising=False)
    keyed_persona(workdir)

    result = invoke("serve", "--port", "0")

    assert result.exit_code == 2, result.output
    assert "persona.yaml:model.api_key: environment variable PARTNERS_TEST_UNSET_KEY is not set" in result.stderr


def test_a_misspelt_key_deep_inside_an_optional_model_gets_its_suggestion(invoke, workdir):
    write(workdir, "partners:\n  - id: tutor\n    name: Tutor\n    model: {model: ollama/llama3, api_bsae: 'http://127.0.0.1:11434'}\n")

    result = invoke("serve")

    assert_config_error(result, "partners.0.model.api_bsae", "did you mean `api_base`?")
