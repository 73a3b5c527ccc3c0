"""A downloaded persona folder cannot put the host's files into prompts or search results.

Links that lead outside the persona folder are refused with one line naming
the link; links that stay inside are fine.  ``SOUL.md`` and notes are capped
in size, and a file over its cap is refused at load, never cut.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from brain.notes import NotesIndex, note_files
from gateway.cli import cli
from gateway.core.errors import ConfigError
from personas.files import MAX_NOTE_BYTES, MAX_SOUL_BYTES
from personas.loader import find_persona, load_persona

SOUL = "# Tester\n\nA patient tutor.\n"
SECRET = "ROOT-PASSWORD hunter2 photosynthesis"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A folder beside the persona, standing for the rest of the host: a secret file and a folder of them."""
    outside = tmp_path / "host"
    (outside / "etc").mkdir(parents=True)
    (outside / "etc" / "shadow.md").write_text(f"# Shadow\n\n{SECRET}\n", encoding="utf-8")
    return outside


def make_persona(root: Path, *, soul: str | None = SOUL, spec: str = "name: Tester\n") -> Path:
    folder = root / "personas" / "tester"
    (folder / "notes").mkdir(parents=True)
    (folder / "persona.yaml").write_text(spec, encoding="utf-8")
    if soul is not None:
        (folder / "SOUL.md").write_text(soul, encoding="utf-8")
    (folder / "notes" / "leaves.md").write_text("# Leaves\n\nLeaves make food by photosynthesis.\n", encoding="utf-8")
    return folder


def refused(folder: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_persona(folder)
    return str(caught.value)


def test_a_soul_linked_outside_the_folder_is_refused_naming_the_link(tmp_path, host):
    folder = make_persona(tmp_path, soul=None)
    (folder / "SOUL.md").symlink_to(host / "etc" / "shadow.md")
    said = refused(folder)
    assert said.startswith(f"{folder / 'SOUL.md'}: is a link to {host / 'etc' / 'shadow.md'}, outside the persona folder")
    assert SECRET not in said and "\n" not in said


def test_persona_yaml_linked_outside_is_refused(tmp_path, host):
    folder = make_persona(tmp_path)
    (folder / "persona.yaml").unlink()
    (host / "persona.yaml").write_text("name: Elsewhere\n", encoding="utf-8")
    (folder / "persona.yaml").symlink_to(host / "persona.yaml")
    assert refused(folder).startswith(f"{folder / 'persona.yaml'}: is a link to")


def test_links_that_stay_inside_the_folder_are_fine(tmp_path):
    folder = make_persona(tmp_path, soul=None)
    (folder / "voice").mkdir()
    (folder / "voice" / "soul.md").write_text(SOUL, encoding="utf-8")
    (folder / "SOUL.md").symlink_to(Path("voice") / "soul.md")
    (folder / "shared").mkdir()
    (folder / "shared" / "roots.md").write_text("# Roots\n\nRoots drink water.\n", encoding="utf-8")
    (folder / "notes" / "shared").symlink_to(folder / "shared", target_is_directory=True)
    (folder / "notes" / "loop").symlink_to(folder / "notes", target_is_directory=True)  # a cycle, walked once

    persona = load_persona(folder)

    assert persona.soul == SOUL.strip()
    assert [rel for rel, _ in note_files(persona)] == ["notes/leaves.md", "notes/shared/roots.md"]


def test_a_notes_folder_linked_outside_is_refused(tmp_path, host):
    folder = make_persona(tmp_path, spec="name: Tester\nknowledge: [notes/, library]\n")
    (folder / "library").symlink_to(host / "etc", target_is_directory=True)
    assert refused(folder).startswith(f"{folder / 'library'}: is a link to {host / 'etc'}, outside the persona folder")


def test_a_note_linked_outside_is_refused_at_load(tmp_path, host):
    folder = make_persona(tmp_path)
    (folder / "notes" / "passwords.md").symlink_to(host / "etc" / "shadow.md")
    assert refused(folder).startswith(f"{folder / 'notes' / 'passwords.md'}: is a link to")


def test_a_link_added_after_load_is_never_searched(tmp_path, host):
    folder = make_persona(tmp_path)
    persona = load_persona(folder)  # loads clean; the links come later, as a download's update would
    (folder / "notes" / "passwords.md").symlink_to(host / "etc" / "shadow.md")
    (folder / "notes" / "system").symlink_to(host / "etc", target_is_directory=True)

    index = NotesIndex()
    found = index.search(persona, "photosynthesis")
    assert [p.path for p in found] == ["notes/leaves.md"]
    assert all(SECRET not in p.text for p in found) and all(SECRET not in t for t in index.topics(persona))


def test_a_soul_over_the_cap_is_refused_not_cut(tmp_path):
    folder = make_persona(tmp_path, soul="# Big\n\n" + "word " * (MAX_SOUL_BYTES // 5 + 1))
    size = (folder / "SOUL.md").stat().st_size
    assert size > MAX_SOUL_BYTES
    said = refused(folder)
    assert said.startswith(f"{folder / 'SOUL.md'}: is {size:,} bytes; the limit is 32 KiB (fix: ")


def test_a_soul_at_the_cap_loads(tmp_path):
    soul = "# Fits\n\n" + "x" * (MAX_SOUL_BYTES - 8)
    folder = make_persona(tmp_path, soul=soul)
    assert (folder / "SOUL.md").stat().st_size == MAX_SOUL_BYTES
    assert load_persona(folder).soul == soul


def huge_note(folder: Path) -> Path:
    path = folder / "notes" / "huge.md"
    path.write_text("# Huge\n\n" + "photosynthesis " * (MAX_NOTE_BYTES // 15 + 1), encoding="utf-8")
    return path


def test_a_note_over_the_cap_is_refused_at_load(tmp_path):
    folder = make_persona(tmp_path)
    path = huge_note(folder)
    assert refused(folder).startswith(f"{path}: is {path.stat().st_size:,} bytes; the limit is 1 MiB (fix: split it")


def test_a_note_over_the_cap_added_later_is_left_out_of_search(tmp_path):
    folder = make_persona(tmp_path)
    persona = load_persona(folder)
    huge_note(folder)
    assert [rel for rel, _ in note_files(persona)] == ["notes/leaves.md"]


def test_doctor_names_the_link_in_one_line(tmp_path, host, monkeypatch):
    folder = make_persona(tmp_path, soul=None)
    (folder / "SOUL.md").symlink_to(host / "etc" / "shadow.md")
    config = tmp_path / "partners.yaml"
    config.write_text("data_dir: ./data\npartners:\n  - id: tutor\n    name: Tutor\n    persona: tester\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PARTNERS_CONFIG", raising=False)

    result = CliRunner().invoke(cli, ["--config", str(config), "doctor", "--offline"], prog_name="partners")

    assert result.exit_code != 0 and "Traceback" not in result.output
    line = next(line for line in result.output.splitlines() if "SOUL.md" in line)
    assert f"{folder / 'SOUL.md'}: is a link to {host / 'etc' / 'shadow.md'}, outside the persona folder" in line
    assert SECRET not in result.output and os.fspath(host) in line


def test_a_persona_folder_that_is_itself_a_link_is_confined_to_where_it_leads(tmp_path):
    real = make_persona(tmp_path / "downloads")
    (tmp_path / "personas").mkdir()
    (tmp_path / "personas" / "tester").symlink_to(real, target_is_directory=True)
    persona = load_persona("tester", [tmp_path / "personas"])

    assert find_persona("tester", [tmp_path / "personas"]) == tmp_path / "personas" / "tester"
    assert persona.soul == SOUL.strip() and [rel for rel, _ in note_files(persona)] == ["notes/leaves.md"]
