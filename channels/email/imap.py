"""The IMAP side: one logged-in session on the partner's mailbox, with aioimaplib.

It knows the mailbox's UIDVALIDITY and UIDNEXT (from SELECT), lists UIDs,
fetches sizes and whole messages (``BODY.PEEK[]``: reading never changes
flags), marks processed mail ``\\Seen``, and waits for new mail with IDLE --
re-issued every ``idle_renew_s`` -- or, without IDLE, by NOOP polling.

aioimaplib leaves a command waiting when the server drops the connection, so
every call here is bounded by the configured timeout and raced against the
connection-lost callback.  Translation::

    LOGIN refused                      -> AuthFailed
    SELECT refused                     -> NotFound (no such mailbox)
    refused connection, drop, timeout  -> PeerUnreachable, naming host:port in plain words
    any other NO/BAD                   -> PeerUnavailable (the session is rebuilt)
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

import aioimaplib

from channels.email.config import EmailConfig, ImapSecurity
from gateway.core.errors import AuthFailed, NotFound, PeerUnavailable, PeerUnreachable
from gateway.endpoints import why_unreachable

PLATFORM = "email"
FETCH_HEAD = re.compile(rb"^\d+ FETCH \(.*?UID (\d+)")
SIZE = re.compile(rb"RFC822\.SIZE (\d+)")
T = TypeVar("T")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MailboxState:
    uidvalidity: int
    uidnext: int


def _code(response, name: bytes) -> int | None:
    for line in response.lines:
        match = re.search(rb"\[" + name + rb" (\d+)\]", bytes(line))
        if match:
            return int(match.group(1))
    return None


class ImapSession:
    def __init__(self, settings: EmailConfig, tls_context: ssl.SSLContext | None = None) -> None:
        self.settings = settings
        self.tls_context = tls_context
        self._lost = asyncio.Event()
        self._client: aioimaplib.IMAP4 | None = None
        self.exists_notices = 0
        """How many new-mail notices the server has sent on this session."""

    # ------------------------------------------------------------------ plumbing

    def _on_lost(self, error: Exception | None) -> None:
        self._lost.set()

    async def _bounded(self, call: Awaitable[T], what: str, timeout: float | None = None) -> T:
        """Run one IMAP call; a dropped connection or a timeout becomes PeerUnavailable."""
        task = asyncio.ensure_future(call)
        lost = asyncio.ensure_future(self._lost.wait())
        try:
            done, _ = await asyncio.wait({task, lost}, timeout=timeout or self.settings.timeout_s,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
        if task in done:
            try:
                return task.result()
            except (aioimaplib.AioImapException, OSError, TimeoutError) as error:
                why = why_unreachable(error)
                if why is None:
                    raise PeerUnavailable(PLATFORM, f"IMAP {what}: {type(error).__name__}: {error}") from error
                raise self._unreachable(what, why) from error
        task.cancel()
        reason = "the connection was dropped" if self._lost.is_set() else f"no answer within {timeout or self.settings.timeout_s:g} s"
        raise self._unreachable(what, reason)

    def _unreachable(self, what: str, why: str) -> PeerUnreachable:
        s = self.settings
        return PeerUnreachable(PLATFORM, f"{s.imap_host}:{s.imap_port}", why, action=f"IMAP {what}",
                               check="the network, imap_host, imap_port and imap_security")

    @staticmethod
    def _ok(response, what: str) -> None:
        if response.result != "OK":
            detail = b" ".join(bytes(line) for line in response.lines[-1:]).decode(errors="replace")
            raise PeerUnavailable(PLATFORM, f"IMAP {what} said {response.result}: {detail}", code=response.result)

    def _count_exists_notices(self) -> None:
        """Count every untagged EXISTS, whichever command it rides on.

        A server announces new mail once, on the answer to whatever command is running:
        aioimaplib drops the notice when that command is a SEARCH.  Counting them lets
        the reader search again instead of idling past mail it was already told about."""
        assert self._client is not None
        protocol = self._client.protocol
        original = protocol._untagged_response

        def noting(line: bytes):
            if line.endswith(b" EXISTS"):
                self.exists_notices += 1
            return original(line)

        protocol._untagged_response = noting

    # ------------------------------------------------------------------ session

    async def open(self) -> MailboxState:
        s = self.settings
        await self._connect()
        await self._login()
        assert self._client is not None
        response = await self._bounded(self._client.select(s.mailbox), "select")
        return self._select_state(response)

    async def _connect(self) -> None:
        s = self.settings
        if s.imap_security is ImapSecurity.TLS:
            context = self.tls_context or ssl.create_default_context()
            self._client = aioimaplib.IMAP4_SSL(host=s.imap_host, port=s.imap_port, timeout=s.timeout_s, ssl_context=context)
            self._client.protocol.conn_lost_cb = self._on_lost
        else:
            self._client = aioimaplib.IMAP4(host=s.imap_host, port=s.imap_port, timeout=s.timeout_s, conn_lost_cb=self._on_lost)
        self._count_exists_notices()
        await self._bounded(self._client.wait_hello_from_server(), "connect")

    async def _login(self) -> None:
        s = self.settings
        assert self._client is not None
        response = await self._bounded(self._client.login(s.login, s.password.get_secret_value()), "login")
        if response.result != "OK":
            detail = b" ".join(bytes(line) for line in response.lines).decode(errors="replace")
            raise AuthFailed(PLATFORM, f"IMAP login refused for {s.login}: {detail}: check username and the app password",
                             code=response.result)

    def _select_state(self, response) -> MailboxState:
        s = self.settings
        if response.result != "OK":
            raise NotFound(PLATFORM, f"IMAP mailbox {s.mailbox!r} cannot be selected", code=response.result)
        uidvalidity, uidnext = _code(response, b"UIDVALIDITY"), _code(response, b"UIDNEXT")
        if uidvalidity is None:
            raise PeerUnavailable(PLATFORM, f"IMAP server gave no UIDVALIDITY for {s.mailbox!r}")
        return MailboxState(uidvalidity, uidnext or 1)

    async def examine(self) -> None:
        """Log in and open the mailbox read-only (EXAMINE): the probe's check, which changes nothing."""
        s = self.settings
        await self._connect()
        await self._login()
        assert self._client is not None
        response = await self._bounded(self._client.examine(s.mailbox), "examine")
        if response.result != "OK":
            raise NotFound(PLATFORM, f"IMAP mailbox {s.mailbox!r} cannot be opened", code=response.result)

    @property
    def can_idle(self) -> bool:
        return self._client is not None and self._client.has_capability("IDLE")

    async def search(self, *criteria: str) -> list[int]:
        assert self._client is not None
        response = await self._bounded(self._client.uid_search(*criteria, charset=None), "search")
        self._ok(response, "search")
        uids: list[int] = []
        for line in response.lines[:-1]:
            uids += [int(u) for u in bytes(line).split() if u.isdigit()]
        return sorted(set(uids))

    async def sizes(self, uids: list[int]) -> dict[int, int]:
        assert self._client is not None
        response = await self._bounded(self._client.uid("fetch", ",".join(map(str, uids)), "(UID RFC822.SIZE)"), "fetch sizes")
        self._ok(response, "fetch sizes")
        sizes: dict[int, int] = {}
        for line in response.lines:
            line = bytes(line)
            head, size = FETCH_HEAD.match(line), SIZE.search(line)
            if head and size:
                sizes[int(head.group(1))] = int(size.group(1))
        return sizes

    async def fetch(self, uid: int) -> bytes | None:
        """The whole message, or None when the server sent none (expunged meanwhile)."""
        assert self._client is not None
        response = await self._bounded(self._client.uid("fetch", str(uid), "(UID BODY.PEEK[])"), "fetch", self.settings.timeout_s * 4)
        self._ok(response, "fetch")
        # One UID was asked for, so the one literal in the answer is its body, wherever the
        # server put the UID item (before or after BODY[]).
        for line in response.lines:
            if isinstance(line, bytearray):
                return bytes(line)
        return None

    async def mark_seen(self, uids: list[int]) -> None:
        assert self._client is not None
        response = await self._bounded(self._client.uid("store", ",".join(map(str, uids)), "+FLAGS.SILENT (\\Seen)"), "store")
        self._ok(response, "store")

    async def wait_for_mail(self, use_idle: bool) -> None:
        """Return when new mail may have arrived: an IDLE push, the IDLE renewal time, or one poll interval."""
        assert self._client is not None
        s = self.settings
        if not (use_idle and self.can_idle):
            await self._bounded(asyncio.sleep(s.poll_interval_s), "poll wait", s.poll_interval_s + s.timeout_s)
            self._ok(await self._bounded(self._client.noop(), "noop"), "noop")
            return
        idle = await self._bounded(self._client.idle_start(timeout=s.idle_renew_s), "idle")
        try:
            while True:
                push = await self._bounded(self._client.wait_server_push(timeout=s.idle_renew_s + s.timeout_s),
                                           "idle wait", s.idle_renew_s + 2 * s.timeout_s)
                if push == aioimaplib.STOP_WAIT_SERVER_PUSH or any(b"EXISTS" in bytes(line) for line in push):
                    return
        finally:
            if self._client.has_pending_idle() and not self._lost.is_set():
                self._client.idle_done()
                await self._bounded(idle, "idle done")

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            if not self._lost.is_set() and client.get_state() in ("AUTH", "SELECTED"):
                await asyncio.wait_for(client.logout(), 3)
        except (aioimaplib.AioImapException, OSError, TimeoutError):
            pass
        finally:
            transport = getattr(client.protocol, "transport", None)
            if transport is not None:
                transport.close()
