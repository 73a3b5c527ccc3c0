"""The lint checks, held by a test: ``ruff check`` over the repository finds nothing.

The rules (pyflakes, pycodestyle, import order, bugbear, pyupgrade, async pitfalls, stale
``noqa`` comments), the line length and the per-file exceptions live in ``[tool.ruff]`` in
pyproject.toml, so ``ruff check .`` on the command line and this test check the same thing.
The ruff is the one installed beside this interpreter (the ``test`` extra pins its minor:
a new minor brings new rules, taken on purpose).  It runs with ``--no-cache``: it takes about
a second over the whole tree, and the test leaves nothing behind in the checkout.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = Path(sys.executable).with_name("ruff")


def test_ruff_finds_nothing() -> None:
    assert RUFF.exists(), f"no ruff beside {sys.executable}: install the test extra (pip install -e '.[test]')"
    result = subprocess.run(
        [str(RUFF), "check", "--config", str(ROOT / "pyproject.toml"), "--no-cache", "--no-fix", "--output-format", "full", "."],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, f"ruff found problems (exit {result.returncode}):\n{result.stdout}{result.stderr}"
