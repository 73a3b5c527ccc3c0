"""Who a web chat learner is: a secret session in a cookie, and the stable id derived from it.

The session is the learner's only credential: whoever holds it reads that
learner's backlog, writes as them and may ``/forget`` them.  So it lives in an
``HttpOnly``, ``SameSite=Strict`` cookie the gateway issues (never in a URL,
never readable by the page's script), and the gateway itself never stores or
logs it.  Everything past the HTTP edge -- the chat and user id of inbound
messages, memory, logs, ``/export``, the admin API -- sees the *learner id*
instead: a keyed hash (HMAC-SHA256) of the session under a secret kept in the
data directory, so it is stable for one session and cannot be turned back into
the credential, nor computed by anyone who lacks the data directory.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import secrets
from pathlib import Path

COOKIE = "partners_webchat"
KEY_FILE = "webchat.key"
SESSION_BYTES = 32
SESSION_RULE = "must be 22-100 characters of letters, digits, '_' or '-'"
COOKIE_MAX_AGE_S = 400 * 24 * 3600
"""The longest lifetime browsers keep a cookie for (RFC 6265bis caps it at 400 days)."""
_SESSION = re.compile(r"[A-Za-z0-9_-]{22,100}")
"""At least 22 base64url characters: 128 bits when random, as the page's are."""
_LEARNER_PREFIX = "w"
_SOURCE_PREFIX = "n"
_LEARNER_HEX = 32


def new_session() -> str:
    return secrets.token_urlsafe(SESSION_BYTES)


def well_formed(session: str | None) -> bool:
    return session is not None and _SESSION.fullmatch(session) is not None


class LearnerIds:
    """Derives learner ids from sessions with the data directory's web chat key (made on first use)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / KEY_FILE
        self._key: bytes | None = None

    def learner(self, session: str) -> str:
        digest = hmac.new(self._secret(), session.encode("ascii"), hashlib.sha256).hexdigest()
        return _LEARNER_PREFIX + digest[:_LEARNER_HEX]

    def source(self, client_address: str | None) -> str:
        """Where a learner writes from, as a keyed hash (the address itself is never kept).

        IPv6 counts by its /64, which one home or phone gets whole; IPv4 by the address.  Behind a
        reverse proxy this is the proxy's address unless the proxy is trusted to forward the client's
        (uvicorn trusts ``X-Forwarded-For`` from 127.0.0.1, its ``FORWARDED_ALLOW_IPS`` default).
        """
        try:
            address = ipaddress.ip_address(client_address or "")
        except ValueError:
            return ""
        if address.version == 6:
            network = str(ipaddress.ip_network(f"{address}/64", strict=False))
        else:
            network = str(address)
        digest = hmac.new(self._secret(), f"source:{network}".encode("ascii"), hashlib.sha256).hexdigest()
        return _SOURCE_PREFIX + digest[:_LEARNER_HEX]

    def _secret(self) -> bytes:
        if self._key is None:
            self._key = _load_or_create(self.path)
        return self._key


def _load_or_create(path: Path) -> bytes:
    """Read the key, or write a new one that only the gateway's user can read.

    The new key is written whole to a private temporary file and linked into place, which fails if
    the key exists: two accounts or processes making it at once agree on the first, and nobody ever
    reads a half-written key.  Losing the file re-keys every learner (they start afresh).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        draft = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_bytes(32).hex() + "\n")
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    try:
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except ValueError:
        key = b""
    if len(key) < 32:
        raise ValueError(f"{path} does not hold a web chat key; delete it to make a new one")
    return key
