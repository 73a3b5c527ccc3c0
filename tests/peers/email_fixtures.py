"""Session fixtures for Dovecot (IMAP, LMTP) and the aiosmtpd SMTP server, shared by the contract suite and tests/channels/email.

One peer per session: tests take fresh addresses from it (``new_address``), so
they never see each other's mail.  A missing Dovecot fails the fixture with
the command that installs it; nothing is skipped.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def email_peer():
    """Dovecot and the SMTP server relaying into it, on free loopback ports.

    Its directory is made with ``tempfile`` rather than pytest's tmp_path: pytest's
    base dir is private to the test user (0700), and Dovecot's mail processes run
    as ``vmail``, which must reach the mail dir."""
    from tests.peers.email_peer import EmailPeer

    root = Path(tempfile.mkdtemp(prefix="partners-dovecot-"))
    peer = EmailPeer(root).start()
    try:
        yield peer
    finally:
        peer.stop()
        shutil.rmtree(root, ignore_errors=True)
