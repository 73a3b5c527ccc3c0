"""The type checks, held by a test: mypy over the four packages passes with the project's config.

The config (packages, strictness, the per-library ``ignore_missing_imports``) lives in
``[tool.mypy]`` in pyproject.toml, so ``mypy`` on the command line and this test check the
same thing.  mypy runs as a subprocess of this interpreter -- the venv that has the extras
installed, whose libraries' own types are part of the check -- with its incremental cache in
the checkout's git-ignored ``.mypy_cache/``: a first run takes minutes, a rerun seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_errors() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(ROOT / ".mypy_cache"), "--no-color-output"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, f"mypy found errors (exit {result.returncode}):\n{result.stdout}{result.stderr}"
