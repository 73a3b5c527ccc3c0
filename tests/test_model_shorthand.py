"""``model: provider/name`` is one rule of ModelSettings: a partner, a persona and a backup all accept it."""

from __future__ import annotations

import pytest

from gateway.configfile import load_config
from gateway.core.config import ModelSettings
from gateway.core.errors import ConfigError
from personas.loader import load_persona, persona_dirs

CONFIG = """\
partners:
  - id: short
    name: Short
    model: openai/gpt-4o-mini
  - id: full
    name: Full
    persona: tester
    model:
      model: ollama/llama3
      api_base: http://127.0.0.1:11434
      backup: openai/gpt-4o-mini
"""


def write_setup(tmp_path):
    (tmp_path / "partners.yaml").write_text(CONFIG, encoding="utf-8")
    persona = tmp_path / "personas" / "tester"
    persona.mkdir(parents=True)
    (persona / "persona.yaml").write_text(
        "name: Tester\nmodel:\n  model: openai/gpt-4o\n  backup: ollama/llama3\n", encoding="utf-8"
    )
    (persona / "SOUL.md").write_text("# Tester\n\nA patient tutor.\n", encoding="utf-8")
    return tmp_path / "partners.yaml"


def test_a_partner_in_partners_yaml_takes_the_model_shorthand(tmp_path):
    config = load_config(write_setup(tmp_path))

    short = config.partner("short").model
    assert short == ModelSettings(model="openai/gpt-4o-mini")
    assert (short.connect_timeout_s, short.first_token_timeout_s, short.timeout_s) == (5.0, 15.0, 120.0)
    full = config.partner("full").model
    assert full.model == "ollama/llama3" and full.backup == ModelSettings(model="openai/gpt-4o-mini")


def test_a_persona_and_its_backup_take_the_same_shorthand(tmp_path):
    config = load_config(write_setup(tmp_path))

    persona = load_persona("tester", persona_dirs(config))

    assert persona.model.model == "openai/gpt-4o"
    assert persona.model.backup == ModelSettings(model="ollama/llama3")


def test_a_model_that_is_neither_a_name_nor_a_mapping_is_still_refused(tmp_path):
    path = tmp_path / "partners.yaml"
    path.write_text("partners:\n  - id: p\n    name: P\n    model: 5\n", encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        load_config(path)

    assert "partners.0.model" in str(caught.value)
