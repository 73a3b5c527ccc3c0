"""The dependency arrows of the house, held by a test.

channels/ knows the vocabulary and the error tree, never the brain; brain/
never knows a channel; the vocabulary modules are leaves; and nothing outside
the composition root and the CLI imports both sides.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LEAVES = ["gateway/messages.py", "gateway/events.py", "gateway/errors.py"]


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def python_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", python_files("channels"), ids=lambda p: str(p.relative_to(ROOT)))
def test_channels_never_import_the_brain(path):
    assert not {m for m in imports_of(path) if m == "brain" or m.startswith("brain.")}


@pytest.mark.parametrize("path", python_files("brain"), ids=lambda p: str(p.relative_to(ROOT)))
def test_brain_never_imports_a_channel(path):
    assert not {m for m in imports_of(path) if m == "channels" or m.startswith("channels.")}


@pytest.mark.parametrize("leaf", LEAVES)
def test_vocabulary_modules_are_leaves(leaf):
    project = {m for m in imports_of(ROOT / leaf) if m.split(".")[0] in {"gateway", "channels", "brain", "personas"}}
    allowed = {"gateway.messages"}  # events may name attachments
    assert project <= allowed


def test_only_the_composition_root_wires_channels_to_responders():
    wiring = {"gateway/app.py", "gateway/cli.py", "gateway/doctor.py"}
    for path in python_files("gateway"):
        rel = str(path.relative_to(ROOT))
        if rel in wiring:
            continue
        imported = imports_of(path)
        assert not any(m.startswith("channels.") and m not in {"channels.base", "channels.registry"} for m in imported), rel
