"""Persona folders: the shipped ones load, every mistake names file, field and fix, user folders win."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from brain.tools.surface import ToolRule
from gateway.configfile import parse_config
from gateway.core.config import MidTurn, ModelSettings
from gateway.core.errors import ConfigError
from personas.loader import (
    PACKAGED_DIR,
    AnswerStyle,
    Persona,
    list_personas,
    load_persona,
    persona_dirs,
)

SHIPPED = ["homework-helper", "language-partner", "socratic-math", "study-buddy"]
KNOWN_TOOLS = {"knowledge_search", "memory_read", "memory_write", "schedule_reminder", "handoff_to_teacher", "fetch_page"}
SOUL = "# Tester\n\nA patient tutor. Asks before telling. Hands off to the teacher when worried.\n"


def make_persona(root: Path, name: str = "tester", spec: str = "name: Tester\n", soul: str | None = SOUL) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "persona.yaml").write_text(spec, encoding="utf-8")
    if soul is not None:
        (folder / "SOUL.md").write_text(soul, encoding="utf-8")
    return folder


# --------------------------------------------------------------------------- the shipped personas


def test_exactly_the_four_personas_ship():
    assert list(list_personas()) == SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_persona_loads_and_is_complete(name):
    persona = load_persona(name)

    assert persona.id == name and persona.folder == PACKAGED_DIR / name
    assert persona.name and persona.description and persona.greeting
    assert persona.model is None  # shipped personas never assume a provider
    assert set(persona.enabled_tools) <= KNOWN_TOOLS
    assert "handoff_to_teacher" in persona.forced_tools  # the teacher is always reachable
    assert 150 <= len(persona.soul.split()) <= 400
    soul = persona.soul.lower()
    assert "## boundaries" in soul and "teacher" in soul and "trusted adult" in soul
    for path in persona.knowledge_paths():
        assert path.exists()
        assert all(note.read_text(encoding="utf-8").startswith("# ") for note in path.glob("*.md"))


def test_study_buddy_is_the_default_and_has_real_notes():
    assert parse_config({"partners": [{"id": "p", "name": "P"}]}).partners[0].persona == "study-buddy"
    notes = sorted(p.stem for p in (PACKAGED_DIR / "study-buddy" / "notes").glob("*.md"))
    assert 6 <= len(notes) <= 10
    assert {"photosynthesis", "water-cycle", "fractions", "pythagorean-theorem", "newtons-laws"} <= set(notes)


def test_each_persona_has_its_character():
    assert load_persona("homework-helper").policies.answer_style is AnswerStyle.SINGLE_MESSAGE
    assert load_persona("homework-helper").policies.mid_turn is MidTurn.QUEUE
    assert set(load_persona("language-partner").languages) == {"es", "fr", "en"}
    assert "never give the final answer" in load_persona("socratic-math").soul.lower()
    assert load_persona("study-buddy").policies.answer_style is AnswerStyle.CHAT


# --------------------------------------------------------------------------- what a persona.yaml may say


def test_a_full_persona_yaml_validates(tmp_path, monkeypatch):
    monkeypatch.setenv("TUTOR_KEY", "sk-from-env")
    folder = make_persona(tmp_path, spec="""
name: Full
description: Everything set.
greeting: Hello!
languages: [en, pt-BR, zh-Hans]
model:
  model: openai/gpt-4o-mini
  api_key: env:TUTOR_KEY
  backup: {model: ollama/llama3}
tools: [knowledge_search, memory_read]
forced_tools: [handoff_to_teacher, memory_read]
tool_rules:
  - role: stranger
    remove: [memory_read]
knowledge: [notes/, extra.md]
policies:
  mid_turn: merge
  max_rounds: 4
  settle_rounds: 1
  daily_token_budget_per_learner: 1000
  daily_token_budget_per_partner: 50000
  answer_style: single_message
""")
    (folder / "notes").mkdir()
    (folder / "extra.md").write_text("# Extra\n", encoding="utf-8")

    persona = load_persona(folder)

    assert persona.model.model == "openai/gpt-4o-mini"
    assert persona.model.api_key.get_secret_value() == "sk-from-env"
    assert persona.model.backup == ModelSettings(model="ollama/llama3")
    assert persona.enabled_tools == ("knowledge_search", "memory_read", "handoff_to_teacher")
    assert persona.tool_rules == (ToolRule(role="stranger", remove=["memory_read"]),)
    assert persona.knowledge_paths() == [folder / "notes/", folder / "extra.md"]
    assert persona.policies.mid_turn is MidTurn.MERGE and persona.policies.settle_rounds == 1
    assert persona.soul == SOUL.strip()


def test_defaults_and_the_model_shorthand(tmp_path):
    bare = load_persona(make_persona(tmp_path, "bare"))
    assert bare.model is None and bare.languages == ("en",) and bare.knowledge == ()
    assert (bare.policies.max_rounds, bare.policies.settle_rounds) == (6, 2)
    assert bare.policies.daily_token_budget_per_learner is None

    short = make_persona(tmp_path, "short", spec="name: Short\nmodel: ollama/llama3\n")
    (short / "notes").mkdir()
    persona = load_persona(short)
    assert persona.model == ModelSettings(model="ollama/llama3")
    assert persona.knowledge == ("notes/",)  # a notes/ folder is knowledge unless knowledge: says otherwise


def test_an_empty_knowledge_list_turns_notes_off(tmp_path):
    folder = make_persona(tmp_path, spec="name: T\nknowledge: []\n")
    (folder / "notes").mkdir()
    assert load_persona(folder).knowledge == ()


# --------------------------------------------------------------------------- every mistake: file, field, fix

CASES = [
    # id, persona.yaml, SOUL.md (None: missing), file, field, words in the fix
    ("unknown field", "name: T\ncolour: blue\n", SOUL, "persona.yaml", "colour", ["spelling", "greeting"]),
    ("unknown policy", "name: T\npolicies:\n  max_round: 3\n", SOUL, "persona.yaml", "policies.max_round", ["spelling", "max_rounds"]),
    ("missing name", "description: no name\n", SOUL, "persona.yaml", "name", ["add `name:`"]),
    ("soul in yaml", "name: T\nsoul: be nice\n", SOUL, "persona.yaml", "soul", ["SOUL.md"]),
    ("id in yaml", "name: T\nid: other\n", SOUL, "persona.yaml", "id", ["folder"]),
    ("bad yaml", "name: T\n\tdescription: tab\n", SOUL, "persona.yaml", "line 2", ["indentation"]),
    ("yaml list", "- name: T\n", SOUL, "persona.yaml", None, ["name:"]),
    ("empty yaml", "", SOUL, "persona.yaml", None, ["name:"]),
    ("missing soul", "name: T\n", None, "SOUL.md", None, ["voice", "boundaries"]),
    ("empty soul", "name: T\n", "  \n\n", "SOUL.md", None, ["voice"]),
    ("model bad value", "name: T\nmodel:\n  model: x\n  temperature: hot\n", SOUL, "persona.yaml", "model.temperature",
     ["model:", "doctor"]),
    ("model no name", "name: T\nmodel:\n  api_base: http://127.0.0.1:1\n", SOUL, "persona.yaml", "model.model", ["openai/gpt-4o-mini"]),
    ("model unknown field", "name: T\nmodel:\n  model: x\n  key: abc\n", SOUL, "persona.yaml", "model.key", ["api_key: env:NAME"]),
    ("model wrong type", "name: T\nmodel: 3\n", SOUL, "persona.yaml", "model", ["model: provider/name"]),
    ("model literal key", "name: T\nmodel:\n  model: x\n  api_key: sk-literal-secret\n", SOUL, "persona.yaml", "model.api_key",
     ["env:NAME"]),
    ("model unset env", "name: T\nmodel:\n  model: x\n  api_key: env:PERSONA_TEST_UNSET\n", SOUL, "persona.yaml", "model.api_key",
     ["export"]),
    ("bad answer style", "name: T\npolicies:\n  answer_style: essay\n", SOUL, "persona.yaml", "policies.answer_style", ["values listed"]),
    ("bad mid turn", "name: T\npolicies:\n  mid_turn: later\n", SOUL, "persona.yaml", "policies.mid_turn", ["values listed"]),
    ("zero rounds", "name: T\npolicies:\n  max_rounds: 0\n", SOUL, "persona.yaml", "policies.max_rounds", ["correct"]),
    ("bad budget", "name: T\npolicies:\n  daily_token_budget_per_learner: -5\n", SOUL, "persona.yaml",
     "policies.daily_token_budget_per_learner", ["correct"]),
    ("bad language", "name: T\nlanguages: [english!]\n", SOUL, "persona.yaml", "languages.0", ["BCP-47"]),
    ("bad tool name", "name: T\ntools: [Knowledge Search]\n", SOUL, "persona.yaml", "tools.0", ["snake_case"]),
    ("repeated tool", "name: T\ntools: [memory_read, memory_read]\n", SOUL, "persona.yaml", "tools", ["once"]),
    ("rule that adds", "name: T\ntool_rules:\n  - add: [fetch_page]\n", SOUL, "persona.yaml", "tool_rules.0", ["remove"]),
    ("knowledge outside", "name: T\nknowledge: [../elsewhere]\n", SOUL, "persona.yaml", "knowledge", ["relative"]),
    ("knowledge missing", "name: T\nknowledge: [notes/, handouts/]\n", SOUL, "persona.yaml", "knowledge.0", ["create", "remove it"]),
]


@pytest.mark.parametrize(("yaml_text", "soul", "file", "field", "fix_words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_mistake_names_file_field_and_fix(tmp_path, monkeypatch, yaml_text, soul, file, field, fix_words):
    monkeypatch.delenv("PERSONA_TEST_UNSET", raising=False)
    folder = make_persona(tmp_path, spec=yaml_text, soul=soul)

    with pytest.raises(ConfigError) as caught:
        load_persona(folder)

    error = caught.value
    assert error.file == str(folder / file)
    assert error.field == field or (field is not None and (error.field or "").startswith(field + "."))
    assert error.fix and all(word in error.fix for word in fix_words), error.fix
    assert str(folder / file) in str(error) and "(fix: " in str(error)
    assert "sk-literal-secret" not in str(error)


def test_missing_persona_yaml_is_named(tmp_path):
    folder = tmp_path / "tester"
    folder.mkdir()
    (folder / "SOUL.md").write_text(SOUL, encoding="utf-8")

    with pytest.raises(ConfigError) as caught:
        load_persona(folder)

    assert caught.value.file == str(folder / "persona.yaml") and "name:" in caught.value.fix


def test_an_unknown_name_lists_the_personas_there_are(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_persona("no-such-persona", [tmp_path])

    error = caught.value
    assert error.field == "persona" and "no-such-persona" in error.message
    assert "study-buddy" in error.fix and str(tmp_path / "no-such-persona") in error.fix


def test_a_missing_folder_given_by_path_is_named(tmp_path):
    with pytest.raises(ConfigError) as caught:
        load_persona(tmp_path / "gone")

    assert caught.value.file == str(tmp_path / "gone") and "persona.yaml" in caught.value.fix


@pytest.mark.parametrize("name", ["Study Buddy", "study_buddy!", "-leading-dash"])
def test_a_name_must_be_a_folder_name(tmp_path, name):
    with pytest.raises(ConfigError) as caught:
        load_persona(name, [tmp_path])

    assert caught.value.field == "persona" and "lowercase" in caught.value.fix


# --------------------------------------------------------------------------- search order


def test_a_user_folder_overrides_the_packaged_persona(tmp_path):
    mine = tmp_path / "personas"
    shutil.copytree(PACKAGED_DIR / "study-buddy", mine / "study-buddy")
    (mine / "study-buddy" / "SOUL.md").write_text("# Ms Rivera's buddy\n\nSpeak like Ms Rivera.\n", encoding="utf-8")

    persona = load_persona("study-buddy", [mine])

    assert persona.folder == mine / "study-buddy" and "Ms Rivera" in persona.soul
    assert load_persona("study-buddy").folder == PACKAGED_DIR / "study-buddy"  # without the user folder
    listed = list_personas([mine])
    assert listed["study-buddy"] == mine / "study-buddy"
    assert listed["socratic-math"] == PACKAGED_DIR / "socratic-math"


def test_the_first_user_folder_wins_and_user_only_personas_are_found(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    make_persona(first, "chem", spec="name: Chem One\n")
    make_persona(second, "chem", spec="name: Chem Two\n")
    make_persona(second, "bio", spec="name: Bio\n")
    (second / "not-a-persona").mkdir()

    assert load_persona("chem", [first, second]).name == "Chem One"
    assert load_persona("bio", [first, second]).name == "Bio"
    listed = list_personas([first, second, tmp_path / "absent"])
    assert "not-a-persona" not in listed and {"chem", "bio", *SHIPPED} == set(listed)
    assert list(listed) == sorted(listed)


def test_the_user_folder_sits_next_to_the_config(tmp_path):
    config = parse_config({}).model_copy(update={"source": tmp_path / "partners.yaml"})
    assert persona_dirs(config) == [(tmp_path / "personas").resolve()]


# --------------------------------------------------------------------------- caching


def _touch(path: Path, text: str) -> None:
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 1_000_000_000, before + 1_000_000_000))


def test_loaded_personas_are_cached_until_a_file_changes(tmp_path):
    folder = make_persona(tmp_path)
    first = load_persona(folder)

    assert load_persona(folder) is first

    _touch(folder / "SOUL.md", "# Tester\n\nNow stricter.\n")
    second = load_persona(folder)
    assert second is not first and "stricter" in second.soul

    _touch(folder / "persona.yaml", "name: Renamed\n")
    assert load_persona(folder).name == "Renamed"


def test_a_broken_edit_is_reported_not_masked_by_the_cache(tmp_path):
    folder = make_persona(tmp_path)
    load_persona(folder)
    _touch(folder / "persona.yaml", "name: T\ncolour: blue\n")

    with pytest.raises(ConfigError):
        load_persona(folder)


def test_a_persona_is_frozen_and_strict():
    persona = load_persona("study-buddy")
    with pytest.raises(ValidationError, match="frozen"):
        persona.name = "Other"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Persona.model_validate({**persona.model_dump(), "extra": 1})
