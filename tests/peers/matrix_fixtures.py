"""Session fixtures for a Synapse homeserver, shared by the contract suite and tests/channels/matrix.

One Synapse per test session (it takes a second or two to start); each test
registers its own bot and learners, so tests share nothing but the server.
A missing Synapse venv fails the fixture with the command that makes it.
"""

from __future__ import annotations

import pytest

from tests.peers.synapse import SynapsePeer


@pytest.fixture(scope="session")
def synapse(tmp_path_factory) -> SynapsePeer:
    """A real Synapse on a free loopback port (SQLite, no federation), stopped by its pid at the end."""
    peer = SynapsePeer.start(tmp_path_factory.mktemp("synapse"))
    yield peer
    peer.stop()
