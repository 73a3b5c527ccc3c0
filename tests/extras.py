"""The optional SDKs a test drives, imported so that a missing one fails the test instead of skipping it.

``bash deploy/test.sh`` installs every extra the suite covers; a test that finds its SDK missing is a
broken test environment, and the brief's rule is that CI skips nothing.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


def need_module(name: str) -> ModuleType:
    """``name`` imported; a failure naming the command that installs it when it is not there."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        pytest.fail(f"{name} is not installed ({error}): `bash deploy/test.sh` installs every extra the tests need",
                    pytrace=False)
