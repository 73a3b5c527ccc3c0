"""`partners init` and the two starting points it shares with the embedded default."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gateway.configfile import load_config, parse_config
from gateway.core.config import DmPolicy, GroupPolicy
from gateway.defaults import INIT_TEMPLATE, default_config

from .conftest import uncomment


def test_init_writes_the_template_and_says_what_to_do_next(invoke, workdir):
    result = invoke("init")

    assert result.exit_code == 0, result.output
    assert (workdir / "partners.yaml").read_text(encoding="utf-8") == INIT_TEMPLATE
    assert "partners doctor" in result.output and "partners serve" in result.output


def test_init_refuses_to_overwrite_without_force(invoke, workdir):
    target = workdir / "partners.yaml"
    target.write_text("# mine\n", encoding="utf-8")

    refused = invoke("init")
    assert refused.exit_code == 1
    assert "already exists" in refused.stderr and "--force" in refused.stderr
    assert target.read_text(encoding="utf-8") == "# mine\n"

    forced = invoke("init", "--force")
    assert forced.exit_code == 0
    assert target.read_text(encoding="utf-8") == INIT_TEMPLATE


def test_init_writes_where_it_is_told_and_the_next_steps_name_that_file(invoke, workdir):
    result = invoke("init", "conf/tutor.yaml")

    assert result.exit_code == 0, result.output
    assert (workdir / "conf" / "tutor.yaml").is_file()
    assert "partners -c conf/tutor.yaml serve" in result.output


def test_init_defaults_to_the_config_path_option(invoke, workdir):
    result = invoke("-c", "elsewhere.yaml", "init")

    assert result.exit_code == 0, result.output
    assert (workdir / "elsewhere.yaml").is_file()


def test_the_template_parses_as_written():
    config = parse_config(yaml.safe_load(INIT_TEMPLATE))

    assert [p.id for p in config.partners] == ["study-buddy"]
    assert [(b.channel, b.account, b.partner) for b in config.bindings] == [("webchat", "default", "study-buddy")]
    assert set(config.channels) == {"webchat"}
    assert config.account_settings("webchat", "default").access.dm is DmPolicy.OPEN


def test_every_commented_example_in_the_template_is_valid_once_switched_on(monkeypatch):
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "from-the-environment")
    monkeypatch.setenv("OPENAI_API_KEY", "from-the-environment")

    config = parse_config(yaml.safe_load(uncomment(INIT_TEMPLATE)))

    assert [p.id for p in config.partners] == ["study-buddy", "algebra-coach"]
    assert config.partner("study-buddy").owners[0].channel == "telegram"
    assert config.channels["telegram"]["default"]["token"] == "env:TELEGRAM_BOT_TOKEN"
    access = config.account_settings("telegram", "default").access
    assert access.dm is DmPolicy.PAIRING and access.allow_from == ("123456789",)
    assert access.group is GroupPolicy.MENTION
    assert access.groups["-1001234567890"].policy is GroupPolicy.ALWAYS
    assert access.groups["-1009876543210"].enabled is False
    assert access.refusal.notify and access.refusal.min_interval_s == 3600
    group = [b for b in config.bindings if b.chat is not None]
    assert [(b.partner, b.channel, b.chat) for b in group] == [("algebra-coach", "telegram", "-1001234567890")]
    assert config.http.public_url == "https://partners.example.org"


def test_the_written_file_keeps_its_data_next_to_itself(invoke, workdir):
    invoke("init", "conf/partners.yaml")

    config = load_config(workdir / "conf" / "partners.yaml")

    assert config.data_dir == (workdir / "conf" / "partners-data").resolve()


@pytest.mark.parametrize("data_dir", [Path("/srv/partners-data"), Path("relative-data")])
def test_the_embedded_default_is_study_buddy_on_open_web_chat(data_dir):
    config = default_config(data_dir)

    (partner,) = config.partners
    assert (partner.id, partner.name, partner.persona) == ("study-buddy", "Study Buddy", "study-buddy")
    assert partner.greeting
    assert [(b.channel, b.account, b.partner, b.chat) for b in config.bindings] == [("webchat", "default", "study-buddy", None)]
    assert config.account_settings("webchat", "default").access.dm is DmPolicy.OPEN
    assert config.http.host == "127.0.0.1"
    assert config.data_dir == data_dir and config.source is None


def test_the_next_steps_name_the_venv_command_when_the_shell_would_not_find_it(invoke, workdir, monkeypatch):
    script = workdir / ".venv" / "bin" / "partners"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setattr("sys.argv", [str(script), "init"])
    monkeypatch.setenv("PATH", "/nonexistent")  # a new shell: the venv is not activated

    result = invoke("init")

    assert result.exit_code == 0, result.output
    assert ".venv/bin/partners doctor" in result.output and ".venv/bin/partners serve" in result.output


def test_the_next_steps_say_partners_when_the_shell_finds_it(invoke, workdir, monkeypatch):
    script = workdir / "bin" / "partners"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setattr("sys.argv", [str(script), "init"])
    monkeypatch.setenv("PATH", str(script.parent))  # an activated venv

    result = invoke("init")

    assert "\n  partners doctor" in result.output
