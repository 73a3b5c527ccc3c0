"""A test fails when a configured secret shows in what it produced: logs, output, ``/status``, ``/metrics``, the CLI.

Loaded for the whole suite by ``tests/conftest.py``.  What is scanned, per test phase:

- the phase's captured log records, stdout and stderr (the report sections pytest keeps anyway);
- the output of every ``CliRunner.invoke`` (the CLI tests capture it away from stdout);
- every ``/status`` and ``/metrics`` body fetched with httpx;
- ``*.log`` files the test left in its ``tmp_path`` (the stderr of gateway processes it started).

Against: every secret in :data:`gateway.redaction.REGISTRY` (each ``env:`` secret the config
resolved in this process, each token a channel was handed) and :data:`WELL_KNOWN`, the fixed
secrets of the test peers and configs, which a gateway in a subprocess holds without this process
knowing.  A hit fails the test, naming the kind of secret and where it showed -- never the value.

The session logs as ``partners`` does (:func:`gateway.redaction.protect_logging`), so log records
are judged as an operator's terminal would show them.  The cost is one regular-expression search
per non-empty text; most tests produce none.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from gateway.redaction import REGISTRY, Registered, protect_logging, spellings_of

WELL_KNOWN: dict[str, str] = {
    "the email peer's password": "peer-pass",
    "Synapse's registration shared secret": "partners-test-shared-secret",
    "the admin API tests' token": "s3cret-token",
    "the webhook tests' secret": "s3cret_Token-for-the-webhook",
    "the CLI tests' secret": "123456:a-secret-that-must-not-show",
    "the Matrix config tests' token": "syt_secret_token_value",
}
"""Secrets the test peers and configs use, by kind.  Add one when a test configures a new fixed secret."""

LOG_FILE_BYTES = 1 << 20
"""A log file larger than this is scanned only in its last MiB (gateway logs of a test are far smaller)."""

_produced: list[tuple[str, str]] = []
"""(where, text) seen since the last report: CLI output and fetched status pages."""


def _entries() -> list[Registered]:
    return [*REGISTRY.entries(), *(Registered(value, kind) for kind, value in WELL_KNOWN.items())]


class _Patterns:
    """The scanning pattern, rebuilt only when the registry grew."""

    def __init__(self) -> None:
        self.count = -1
        self.any: re.Pattern[str] | None = None
        self.entries: list[Registered] = []

    def current(self) -> tuple[re.Pattern[str] | None, list[Registered]]:
        entries = _entries()
        if len(entries) != self.count:
            spellings = {s for entry in entries for s in spellings_of(entry.value) if len(s) >= 4}
            self.any = re.compile("|".join(re.escape(s) for s in sorted(spellings, key=len, reverse=True)))
            self.count, self.entries = len(entries), entries
        return self.any, self.entries


_PATTERNS = _Patterns()


def leaks(texts: Iterator[tuple[str, str]]) -> list[str]:
    """``kind in where`` for every secret found in ``texts``."""
    produced = [(where, text) for where, text in texts if text]
    if not produced:  # most phases print and log nothing: no pattern is built for them
        return []
    pattern, entries = _PATTERNS.current()
    if pattern is None:
        return []
    found: list[str] = []
    for where, text in produced:
        if pattern.search(text) is None:
            continue
        for entry in entries:
            if any(s in text for s in spellings_of(entry.value) if len(s) >= 4):
                found.append(f"{entry.kind} in {where}")
    return sorted(set(found))


def _log_files(item: pytest.Item) -> Iterator[tuple[str, str]]:
    funcargs: dict[str, Any] = getattr(item, "funcargs", {})
    tmp_path = funcargs.get("tmp_path")
    if not isinstance(tmp_path, Path) or not tmp_path.is_dir():
        return
    for path in tmp_path.rglob("*.log"):
        with path.open("rb") as fh:
            size = path.stat().st_size
            fh.seek(max(0, size - LOG_FILE_BYTES))
            yield f"{path.relative_to(tmp_path)}", fh.read().decode("utf-8", errors="replace")


def _texts(item: pytest.Item, report: pytest.TestReport) -> Iterator[tuple[str, str]]:
    for title, content in report.sections:
        if title.endswith(f" {report.when}"):
            yield title.lower().removeprefix("captured "), content
    while _produced:
        yield _produced.pop(0)
    if report.when == "teardown":
        yield from _log_files(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    found = leaks(_texts(item, report))
    if found and not report.failed:
        report.outcome = "failed"
        report.longrepr = "a secret leaked: " + "; ".join(found)
    return report


def _record_cli(invoke: Any) -> Any:
    def recording(self: CliRunner, *args: Any, **kwargs: Any) -> Result:
        result = invoke(self, *args, **kwargs)
        _produced.append(("CLI output", result.output))
        return result

    return recording


def _record_async(send: Any) -> Any:
    async def recording(self: httpx.AsyncClient, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        response = await send(self, request, **kwargs)
        _remember(request, response, kwargs)
        return response

    return recording


def _record_sync(send: Any) -> Any:
    def recording(self: httpx.Client, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        response = send(self, request, **kwargs)
        _remember(request, response, kwargs)
        return response

    return recording


def _remember(request: httpx.Request, response: httpx.Response, kwargs: dict[str, Any]) -> None:
    path = request.url.path.rstrip("/")
    if not kwargs.get("stream") and path.rsplit("/", 1)[-1] in ("status", "metrics"):
        _produced.append((f"GET {path}", response.text))


def pytest_configure(config: pytest.Config) -> None:
    protect_logging()
    CliRunner.invoke = _record_cli(CliRunner.invoke)  # type: ignore[method-assign]
    httpx.AsyncClient.send = _record_async(httpx.AsyncClient.send)  # type: ignore[method-assign]
    httpx.Client.send = _record_sync(httpx.Client.send)  # type: ignore[method-assign]
