"""Config files an attacker (or a bad download) wrote: aliases, deep nesting, other encodings.

Each gets one line naming the file, the line and the fix, from ``doctor`` and
``serve`` as from every YAML reader (``partners.yaml``, ``persona.yaml``,
``knowledge.yaml``) -- never a hang, never a traceback.  The alias bomb runs
in a subprocess bounded by a generous wait: today it hangs for minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from brain.knowledge.settings import load_settings
from gateway.configfile import load_config
from gateway.core.errors import ConfigError
from gateway.yamlfile import MAX_DEPTH
from personas.loader import load_persona
from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[2]
SOUL = "# Tester\n\nA patient tutor.\n"


def alias_bomb(levels: int) -> str:
    """Nine ``env:`` strings, then ``levels`` lists of nine aliases of the one before: 9**levels paths, few bytes."""
    lines = ["data_dir: ./data", "channels:", "  webchat:", "    default:",
             "      l0: &l0 [" + ", ".join(["env:BOMB"] * 9) + "]"]
    lines += [f"      l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def deep(levels: int) -> str:
    return "data_dir: ./data\nextra: " + "[" * levels + "]" * levels + "\n"


def run_cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PARTNERS_CONFIG", None)
    return subprocess.run([sys.executable, "-m", "gateway.cli", "--config", str(folder / "partners.yaml"), *args],
                          check=False, cwd=folder, env=env, capture_output=True, text=True, timeout=HANG_S)


@pytest.mark.parametrize("command", [("doctor", "--offline"), ("serve",)], ids=["doctor", "serve"])
def test_an_alias_bomb_is_refused_at_once_with_its_line(tmp_path, command):
    bomb = alias_bomb(9)  # 9**9 paths: the env scan walked them for ~25 min
    assert len(bomb) < 1024
    (tmp_path / "partners.yaml").write_text(bomb, encoding="utf-8")

    result = run_cli(tmp_path, *command)  # TimeoutExpired here is the hang

    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "line 6: YAML aliases (*l0) are not allowed in partners.yaml" in output
    assert "Traceback" not in output


def test_a_single_alias_is_refused_too_and_an_anchor_alone_is_fine(tmp_path):
    path = tmp_path / "partners.yaml"
    path.write_text("data_dir: &where ./data\n", encoding="utf-8")
    assert load_config(path).data_dir == (tmp_path / "data").resolve()

    path.write_text("data_dir: &where ./data\nhttp:\n  host: *where\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}:line 3: YAML aliases (*where) are not allowed in partners.yaml (fix: ")


def test_nesting_past_the_bound_is_one_line_not_a_recursion_error(tmp_path):
    path = tmp_path / "partners.yaml"
    path.write_text(deep(5000), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value).startswith(f"{path}:line 2: nested more than {MAX_DEPTH} levels deep (fix: ")


def test_nesting_within_the_bound_reads_as_before(tmp_path):
    path = tmp_path / "partners.yaml"
    path.write_text(deep(MAX_DEPTH - 2), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "extra" in str(caught.value) and "remove this field" in str(caught.value)  # read, then validated


def test_a_file_that_is_not_utf8_names_the_line_and_the_encoding(tmp_path):
    path = tmp_path / "partners.yaml"
    path.write_bytes("# réglages\n".encode() + "http:\n  host: café\n".encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (f"{path}:line 3: not UTF-8 text: byte 0xe9 cannot be read as UTF-8 "
                                 "(fix: save the file as UTF-8 (any editor's 'Save with encoding' does it))")


@pytest.mark.parametrize(("text", "said"), [
    (deep(5000), f"partners.yaml:line 2: nested more than {MAX_DEPTH} levels deep"),
    (alias_bomb(2), "partners.yaml:line 6: YAML aliases (*l0) are not allowed in partners.yaml"),
], ids=["deep", "alias"])
def test_doctor_and_serve_print_one_line_for_a_deep_or_aliased_file(tmp_path, text, said):
    (tmp_path / "partners.yaml").write_text(text, encoding="utf-8")
    for command in (("doctor", "--offline"), ("serve",)):
        result = run_cli(tmp_path, *command)
        output = (result.stdout + result.stderr).strip()
        assert result.returncode != 0 and "Traceback" not in output
        assert f"{tmp_path / said}" in output and "fix" in output


# --------------------------------------------------------------------------- the other YAML files


def persona(root: Path, spec: bytes) -> Path:
    folder = root / "tester"
    folder.mkdir()
    (folder / "persona.yaml").write_bytes(spec)
    (folder / "SOUL.md").write_text(SOUL, encoding="utf-8")
    return folder


@pytest.mark.parametrize(("spec", "said"), [
    (b"name: &n Tester\ndescription: *n\n", "line 2: YAML aliases (*n) are not allowed in persona.yaml"),
    (b"name: Tester\ntools: " + b"[" * 3000 + b"]" * 3000 + b"\n", f"line 2: nested more than {MAX_DEPTH} levels deep"),
    (b"name: Caf\xe9\n", "line 1: not UTF-8 text: byte 0xe9"),
], ids=["alias", "deep", "latin-1"])
def test_persona_yaml_is_read_by_the_same_rules(tmp_path, spec, said):
    folder = persona(tmp_path, spec)
    with pytest.raises(ConfigError) as caught:
        load_persona(folder)
    assert str(caught.value).startswith(f"{folder / 'persona.yaml'}:{said}")


def test_a_soul_that_is_not_utf8_is_one_line(tmp_path):
    folder = persona(tmp_path, b"name: Tester\n")
    (folder / "SOUL.md").write_bytes("# Tuteur\n\nPatient et précis.\n".encode("latin-1"))
    with pytest.raises(ConfigError) as caught:
        load_persona(folder)
    assert str(caught.value).startswith(f"{folder / 'SOUL.md'}:line 3: not UTF-8 text: byte 0xe9")


def test_knowledge_yaml_is_read_by_the_same_rules(tmp_path):
    (tmp_path / "knowledge.yaml").write_text("engine: &e fts\nother: *e\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / 'knowledge.yaml'}:line 2: YAML aliases (*e) are not allowed in knowledge.yaml")
