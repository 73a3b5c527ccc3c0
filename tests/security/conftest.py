"""Fixtures of the security suite.

``cli_logging``: logging as a fresh ``partners`` process sets it up, writing to
a buffer instead of the terminal -- so a test reads exactly what an operator's
terminal (or journal) would show.  The test session's own protection
(``tests/security/leak_scan.py`` installs it, as the CLI does) is taken away
first: the test must show that the CLI's set-up protects, not the harness.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable, Iterator

import pytest


@pytest.fixture
def cli_logging() -> Iterator[Callable[[str], io.StringIO]]:
    """``configure(level)`` sets logging up as ``partners serve --log-level LEVEL`` does; returns what it writes."""
    from gateway.cli import group

    root = logging.getLogger()
    saved = (root.level, logging.getLogRecordFactory(), logging.getLogger("httpx").level)
    logging.setLogRecordFactory(logging.LogRecord)  # a new process: nothing is scrubbed until the CLI says so
    written = io.StringIO()
    added: list[logging.Handler] = []

    def configure(level: str) -> io.StringIO:
        before = list(root.handlers)
        root.handlers.clear()  # basicConfig only acts on a bare root; pytest's capture handlers go back below
        with contextlib.redirect_stderr(written):  # the CLI logs to the stderr of the moment it sets up
            group.configure_logging(level)
        added.extend(root.handlers)
        root.handlers[:] = before + added
        return written

    try:
        yield configure
    finally:
        for handler in added:
            root.removeHandler(handler)
        root.setLevel(saved[0])
        logging.setLogRecordFactory(saved[1])
        logging.getLogger("httpx").setLevel(saved[2])
