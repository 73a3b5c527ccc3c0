"""CLI tests run in an empty temporary folder with no $PARTNERS_CONFIG, like a first-time user."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway.cli import cli

Invoke = Callable[..., Result]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PARTNERS_CONFIG", raising=False)
    return tmp_path


@pytest.fixture
def invoke(workdir: Path) -> Invoke:
    runner = CliRunner()

    def run(*args: str, **kwargs) -> Result:
        return runner.invoke(cli, list(args), prog_name="partners", **kwargs)

    return run


def uncomment(template: str) -> str:
    """Switch on every commented-out setting ("#key: value" lines; "# text" lines stay)."""
    return re.sub(r"(?m)^(\s*)#(?=\S)", r"\1", template)
