"""The suite's leak scan (tests/security/leak_scan.py) fails a test that shows a secret, and names only its kind.

A small test file is run by a pytest of its own, with the scan loaded as the
suite loads it, so the scan is seen failing real tests -- not a call of its
helper.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[2]
REGISTERED = "registered-secret-for-the-scan"

INNER = f'''
import logging

import click
import httpx
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from gateway.redaction import register_secret


def test_printing_a_registered_secret():
    register_secret({REGISTERED!r}, "the inner test's token")
    print("token is", {REGISTERED!r})


def test_logging_a_registered_secret_is_masked_so_passes():
    register_secret({REGISTERED!r}, "the inner test's token")
    logging.getLogger("inner").warning("token is %s", {REGISTERED!r})


def test_a_well_known_secret_on_stderr():
    import sys
    print("password peer-pass", file=sys.stderr)


def test_cli_output():
    @click.command()
    def show():
        click.echo("partners-test-shared-secret")

    assert CliRunner().invoke(show).exit_code == 0


async def test_a_status_page():
    register_secret({REGISTERED!r}, "the inner test's token")
    app = Starlette(routes=[Route("/status", lambda request: PlainTextResponse("key={REGISTERED}"))])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as http:
        assert (await http.get("/status")).status_code == 200


def test_a_gateway_log_file(tmp_path):
    (tmp_path / "gateway-1.log").write_text("INFO token s3cret-token")


def test_nothing_secret():
    print("hello")
'''


def test_the_scan_fails_each_test_that_shows_a_secret_and_names_its_kind(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = auto\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.security.leak_scan", "-q", "-rfE", "-p", "no:cacheprovider", str(tmp_path)],
        check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_S * 4,  # it fails, by design
    )
    out = run.stdout
    failed = {line.split("::")[1].split(" ")[0] for line in out.splitlines() if line.startswith(("FAILED", "ERROR"))}
    assert failed == {"test_printing_a_registered_secret", "test_a_well_known_secret_on_stderr", "test_cli_output",
                      "test_a_status_page", "test_a_gateway_log_file"}, out  # the log file: at teardown, so an error
    assert "the inner test's token in stdout call" in out
    assert "the email peer's password in stderr call" in out
    assert "Synapse's registration shared secret in CLI output" in out
    assert "the inner test's token in GET /status" in out
    assert "the admin API tests' token in gateway-1.log" in out
    reported = out.split("short test summary info", 1)[1]
    assert REGISTERED not in reported and "peer-pass" not in reported
