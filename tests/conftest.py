"""Fixtures shared across the test tree.  Keep this small: add fixtures, nothing else.

- The repository root and ``tests/plugins`` go on ``sys.path``: ``tests.*``
  helpers import from anywhere, and the test plugin channel (``relaychat``,
  with its dist-info) is discovered through the real entry-point mechanism.
- ``loopback_only`` (autouse) fails any test that connects to a non-loopback
  address: offline tests must never reach the network.
- ``tests/security/leak_scan.py`` fails any test whose logs, output, CLI output,
  ``/status`` or ``/metrics`` show a configured secret (and logs as ``partners`` does).
- ``relay_peer``: one relay platform process for the session (bots are per test).
- Each real channel's peer fixtures (a Bot API emulator, Dovecot with an SMTP
  server, Synapse) live in ``tests/peers/<channel>_fixtures.py`` and are
  registered below, so the contract suite and the channel's own tests share
  one peer per session.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs the property tests on a fixed sequence of examples, so a landing never depends on
# the luck of a random seed; local runs stay random (and keep their example database) to
# keep finding new failures.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "tests" / "plugins"
for _path in (str(PLUGINS), str(ROOT)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

pytest_plugins = [
    "tests.security.leak_scan",
    "tests.peers.telegram_fixtures",
    "tests.peers.slack_fixtures",
    "tests.peers.email_fixtures",
    "tests.peers.matrix_fixtures",
]


def _is_loopback(address: object) -> bool:
    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and the like
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # a name that would need DNS


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Fail fast, with the address, when a test reaches beyond 127.0.0.1 / ::1."""
    original_connect, original_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def guarded(original):
        def connect(self, address):
            if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
                raise AssertionError(f"offline test tried to connect to {address!r}; use a loopback peer")
            return original(self, address)

        return connect

    monkeypatch.setattr(socket.socket, "connect", guarded(original_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guarded(original_connect_ex))
    yield


@pytest.fixture(scope="session")
def relay_peer(tmp_path_factory):
    """A relay platform process (tests/peers/relay_platform.py) on a free loopback port."""
    from tests.peers.relay_platform import RelayPeer

    peer = RelayPeer.start(tmp_path_factory.mktemp("relay") / "state.json")
    yield peer
    peer.stop()
