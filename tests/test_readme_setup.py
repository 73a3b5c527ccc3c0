"""The README's step-by-step channel setups hold configs a teacher copies as they are: each must load.

Every ``yaml`` block under a "Put a partner on ..." heading is completed with the
partner it binds and validated the way ``partners serve`` validates it: the
common config, then each account against its channel's own config model.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from channels.registry import load_channel
from gateway.config import parse_config, validate_account

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = re.compile(r"^### Put a partner on (?P<name>.+?)\n(?P<body>.*?)(?=^##)", re.M | re.S)
YAML_BLOCK = re.compile(r"```yaml\n(?P<code>.*?)```", re.S)


def setups() -> dict[str, str]:
    found = {}
    for section in SECTION.finditer(README.read_text()):
        [block] = YAML_BLOCK.findall(section["body"])
        found[section["name"]] = "\n".join(line.removeprefix("   ") for line in block.splitlines())
    return found


def test_the_readme_walks_a_teacher_through_every_available_channel():
    assert set(setups()) == {"Telegram", "email", "Matrix"}


@pytest.mark.parametrize("name", sorted(setups()))
def test_the_readme_setup_loads_as_written(name, monkeypatch, tmp_path):
    raw = yaml.safe_load(setups()[name])
    for secret in re.findall(r"env:([A-Z_]+)", setups()[name]):
        monkeypatch.setenv(secret, "a-secret")
    partners = {binding["partner"] for binding in raw["bindings"]}
    config = parse_config({"data_dir": str(tmp_path), "partners": [{"id": p, "name": p} for p in partners], **raw})
    for channel, accounts in config.channels.items():
        for account in accounts:
            settings = validate_account(config, channel, account, load_channel(channel).config_model)
            assert settings is not None
