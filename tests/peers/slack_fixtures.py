"""Session fixture for the Slack emulator, shared by the contract suite, tests/channels/slack and the crash test.

One emulator process serves the whole session; every test registers its own
app (bot token), so tests never see each other's channels, events or faults.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def slack_api(tmp_path_factory):
    """The Slack emulator (tests/peers/slack_server.py) on a free loopback port; yields its URL."""
    from tests.peers.slack_peer import SlackPeer

    log = tmp_path_factory.mktemp("slack") / "slack-api.log"
    try:
        peer = SlackPeer.start(log)
    except RuntimeError as error:
        pytest.fail(f"the Slack emulator is needed for these tests and failed to start: {error}")
    try:
        yield peer.url
    finally:
        peer.stop()
