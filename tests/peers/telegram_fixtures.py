"""Session fixtures for the Telegram Bot API emulator, shared by the contract suite and tests/channels/telegram.

One emulator process serves the whole session; every test registers its own
bot token, so tests never see each other's chats, updates or faults.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def telegram_api(tmp_path_factory):
    """The Bot API emulator (tests/peers/telegram_server.py) on a free loopback port; yields its URL."""
    from tests.peers.telegram_peer import TelegramPeer

    log = tmp_path_factory.mktemp("telegram") / "telegram-api.log"
    try:
        peer = TelegramPeer.start(log)
    except RuntimeError as error:
        pytest.fail(f"the Telegram Bot API emulator is needed for these tests and failed to start: {error}")
    try:
        yield peer.url
    finally:
        peer.stop()
