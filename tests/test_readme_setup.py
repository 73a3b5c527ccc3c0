"""The README's steps work as written, in a new shell, on the file `partners init` writes.

Every ``yaml`` block under a "Put a partner on ..." heading is added to what
``partners init`` writes -- its ``channels`` next to ``webchat``, its bindings
after init's -- and validated the way ``partners serve`` validates it: the
common config (so a binding naming a partner init did not write fails), then
each account against its channel's own config model.  The commands in the
steps name the venv's ``partners`` and ``pip``, extras install from the
checkout, and the channel table names as available exactly the channels this
release runs.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

from channels.registry import load_channel
from gateway.configfile import parse_config, validate_account
from gateway.core.capabilities import platform_catalog
from gateway.defaults import INIT_TEMPLATE

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SECTION = re.compile(r"^### Put a partner on (?P<name>.+?)\n(?P<body>.*?)(?=^##)", re.M | re.S)
YAML_BLOCK = re.compile(r"```yaml\n(?P<code>.*?)```", re.S)
CODE_SPAN = re.compile(r"`([^`\n]+)`")


def setups() -> dict[str, str]:
    found = {}
    for section in SECTION.finditer(README.read_text()):
        [block] = YAML_BLOCK.findall(section["body"])
        found[section["name"]] = "\n".join(line.removeprefix("   ") for line in block.splitlines())
    return found


def sections() -> dict[str, str]:
    return {section["name"]: section["body"] for section in SECTION.finditer(README.read_text())}


def on_init(snippet: dict, data_dir: Path) -> dict:
    """What the teacher's partners.yaml holds after following a setup: init's file plus the snippet."""
    raw = yaml.safe_load(INIT_TEMPLATE)
    raw["data_dir"] = str(data_dir)
    for channel, accounts in snippet.get("channels", {}).items():
        raw["channels"].setdefault(channel, {}).update(accounts)
    raw["bindings"] = raw["bindings"] + snippet.get("bindings", [])
    assert set(snippet) <= {"channels", "bindings"}, "a setup snippet only adds channels and bindings"
    return raw


def test_the_readme_walks_a_teacher_through_every_available_channel():
    assert set(setups()) == {"Telegram", "email", "Matrix"}


@pytest.mark.parametrize("name", sorted(setups()))
def test_the_readme_setup_loads_as_written_on_the_file_init_writes(name, monkeypatch, tmp_path):
    snippet = yaml.safe_load(setups()[name])
    for secret in re.findall(r"env:([A-Z_]+)", setups()[name]):
        monkeypatch.setenv(secret, "a-secret")
    config = parse_config(on_init(snippet, tmp_path))  # no partners added: the snippet must name init's
    init_partners = {p.id for p in parse_config(yaml.safe_load(INIT_TEMPLATE)).partners}
    assert {b["partner"] for b in snippet["bindings"]} <= init_partners
    for channel, accounts in config.channels.items():
        for account in accounts:
            settings = validate_account(config, channel, account, load_channel(channel).config_model)
            assert settings is not None


@pytest.mark.parametrize("name", sorted(setups()))
def test_the_readme_setup_commands_run_in_a_new_shell(name):
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    spans = CODE_SPAN.findall(sections()[name])
    commands = [s for s in spans if re.match(r"(\S*/)?(partners|pip)\s", s)]
    assert commands, name
    for command in commands:
        assert command.startswith((".venv/bin/partners ", ".venv/bin/pip ")), command
    installs = [c for c in commands if c.startswith(".venv/bin/pip ")]
    assert installs, f"{name}: the setup says what to install"
    for install in installs:
        match = re.fullmatch(r"\.venv/bin/pip install -e '\.\[(?P<extra>[a-z-]+)\]'", install)
        assert match and match["extra"] in extras, install


def test_the_channel_table_names_as_available_exactly_the_channels_this_release_runs():
    after = README.read_text().split("## Channels", 1)[1]
    available = set()
    for row in re.search(r"^\|.*?(?=\n\n)", after, re.M | re.S).group(0).splitlines():
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith(("available", "built in")):
            available |= {name.split(" ")[0].strip(",") for name in cells[0].split(", ")}
    implemented = {name for name, entry in platform_catalog().items() if entry.implemented}
    assert available == implemented | {"webchat", "console"}


def test_the_docs_no_longer_describe_what_is_gone():
    docs = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    text = {path: path.read_text() for path in docs}
    for path, body in text.items():
        assert "until the brain lands" not in body.lower(), path
        assert "partner: buddy" not in body, path
    intro = README.read_text().split("##", 1)[0]
    for name, entry in platform_catalog().items():
        if not entry.implemented:
            assert not re.search(rf"\b{re.escape(name)}\b", intro, re.I), f"the README's opening names {name}, which does not run yet"
            title = entry.title.split(" (")[0]  # "QQ (official bot API)" is named as QQ
            assert not re.search(rf"\b{re.escape(title)}\b", intro, re.I), f"the README's opening names {title}, which does not run yet"
