"""The kit's own arrow: it knows the vocabulary, the commons and third-party libraries, never a channel or the application.

The commons are the house's leaf utilities (tests/test_layering.py names them): the kit may use
:mod:`gateway.endpoints` to say why a server cannot be reached, as every channel does."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.test_layering import LAYERS

KIT = Path(__file__).resolve().parents[3] / "channels" / "_kit"
VOCABULARY = {"gateway.messages", "gateway.errors", "gateway.capabilities"}
PROJECT = ("gateway", "channels", "brain", "personas")
COMMONS = LAYERS["commons"]


def project_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):  # lazy imports inside functions too
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name.split(".")[0] in PROJECT}


@pytest.mark.parametrize("path", sorted(KIT.glob("*.py")), ids=lambda p: p.name)
def test_the_kit_imports_only_the_vocabulary_the_commons_and_itself(path):
    allowed = {name for name in project_imports(path) if name in VOCABULARY or name in COMMONS
               or name.startswith(("gateway.core.", "channels._kit"))}
    assert project_imports(path) == allowed
