"""The email channel's loopback peer: a real Dovecot (IMAP + LMTP) and a real SMTP server in front of it.

Both speak plain and TLS: Dovecot on an IMAP and an IMAPS port, the SMTP
server on a plain, a STARTTLS-only and an implicit-TLS port, all with one
self-signed certificate for 127.0.0.1 made by ``openssl`` at start.

Dovecot runs from a config written into a temp dir that reads nothing from
/etc/dovecot.  Any address at any domain has a mailbox (static userdb), and
every account logs in with the peer's one password (static passdb), so a test
makes a fresh bot address instead of editing a users file.

The SMTP server is aiosmtpd, in its own thread and event loop (the crash test
SIGKILLs the gateway; its mail server must outlive it).  It requires AUTH and
hands each accepted message to Dovecot over LMTP, as a real MTA would.  When
LMTP is unreachable (Dovecot stopped for an outage test) the message waits in
a queue and is retried, as a real MTA's queue would.

Fault injection: :meth:`SmtpPeer.fail_next` makes the next DATA answer with a
chosen SMTP reply -- before delivering (an ordinary refusal) or after
delivering (the message is posted but the client is told it failed: the lost
response SMTP cannot deduplicate).  :meth:`SmtpPeer.hold_quit` makes one login's QUIT wait:
the mail is delivered and ``250`` said, the goodbye still pending.

Learners' mailboxes are read from Dovecot's Maildir on disk with the stdlib
:mod:`mailbox` module: what Dovecot delivered, without a second IMAP client.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import os
import pwd
import re
import shutil
import smtplib
import socket
import ssl
import subprocess
import threading
import time
import warnings
from collections import Counter, deque
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path

from tests.waits import HANG_S, HTTP_S

PASSWORD = "peer-pass"
DOMAIN = "school.test"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_listening(port: int, what: str, timeout: float = HANG_S) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError as error:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:g} s") from error
            time.sleep(0.02)


def make_certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and localhost): the CA the channel is told to trust."""
    if shutil.which("openssl") is None:
        raise AssertionError("`openssl` is not installed: the email TLS tests need it (apt: openssl)")
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "cert.pem", folder / "key.pem"
    result = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True,
    )
    if result.returncode != 0:
        raise AssertionError(f"openssl could not make a test certificate: {result.stderr.strip()}")
    return cert, key


class Dovecot:
    """One Dovecot instance in ``root`` (config, state, logs and mail all live there)."""

    def __init__(self, root: Path) -> None:
        for tool in ("dovecot", "doveadm"):
            if shutil.which(tool) is None:
                raise AssertionError(
                    f"`{tool}` is not installed: the email channel's tests need Dovecot. "
                    "Run `bash deploy/peers/dovecot.sh` (apt: dovecot-imapd dovecot-lmtpd)."
                )
        self.root = root
        self.imap_port, self.imaps_port, self.lmtp_port = free_port(), free_port(), free_port()
        self.noidle_port = free_port()
        """IMAP on 127.0.0.2: the same mailboxes from a server that does not offer IDLE."""
        self.cert, self.key = make_certificate(root / "tls")
        self.conf = root / "dovecot.conf"
        self.running = False
        self._write_config()

    def _write_config(self) -> None:
        root = self.root
        for sub in ("run", "state", "mail"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        root.chmod(0o755)  # Dovecot's own processes must reach the mail dir
        if os.geteuid() != 0:
            raise AssertionError("the email peer starts Dovecot, whose mail processes run as `vmail`: run the tests as root")
        try:
            account = pwd.getpwnam("vmail")
        except KeyError:
            raise AssertionError("user `vmail` is missing: run `bash deploy/peers/dovecot.sh`") from None
        os.chown(root / "mail", account.pw_uid, account.pw_gid)
        self.conf.write_text(f"""\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
ssl = yes
ssl_cert = <{self.cert}
ssl_key = <{self.key}
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{root}/mail/%u/Maildir
mail_uid = vmail
mail_gid = vmail
first_valid_uid = 1
passdb {{
  driver = static
  args = password={PASSWORD}
}}
userdb {{
  driver = static
  args = home={root}/mail/%u allow_all_users=yes
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.imap_port}
  }}
  inet_listener imap_noidle {{
    address = 127.0.0.2
    port = {self.noidle_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.imaps_port}
    ssl = yes
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = 127.0.0.1
    port = {self.lmtp_port}
  }}
}}
local 127.0.0.2 {{
  protocol imap {{
    imap_capability = IMAP4rev1 LITERAL+ SASL-IR LOGIN-REFERRALS ID ENABLE UIDPLUS
  }}
}}
protocol lmtp {{
  postmaster_address = postmaster@{DOMAIN}
}}
""")

    def start(self) -> None:
        # Dovecot daemonizes and its master keeps inherited pipes open: give it files, not pipes.
        errors = self.root / "start.err"
        with errors.open("wb") as err:
            code = subprocess.call(["dovecot", "-c", str(self.conf)], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=err)
        if code != 0:
            raise AssertionError(f"dovecot failed to start ({code}): {errors.read_text().strip()}")
        _wait_listening(self.imap_port, "Dovecot IMAP")
        _wait_listening(self.imaps_port, "Dovecot IMAPS")
        _wait_listening(self.lmtp_port, "Dovecot LMTP")
        self.running = True

    def stop(self) -> None:
        """Stop Dovecot and wait until its IMAP port refuses connections."""
        self.running = False
        subprocess.call(["doveadm", "-c", str(self.conf), "stop"], stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + HANG_S
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.imap_port), timeout=0.5).close()
            except OSError:
                return
            time.sleep(0.02)
        raise AssertionError("dovecot did not stop within 10 s")

    def doveadm(self, *args: str) -> str:
        result = subprocess.run(["doveadm", "-c", str(self.conf), *args], capture_output=True, text=True)
        if result.returncode != 0:
            raise AssertionError(f"doveadm {' '.join(args)} failed: {result.stderr.strip()}")
        return result.stdout

    def maildir(self, address: str) -> Path:
        return self.root / "mail" / address / "Maildir"

    def received(self, address: str) -> list[EmailMessage]:
        """Every message in the address's INBOX, oldest first (Dovecot's Maildir file names start with the time)."""
        return [message for _, message in self.deliveries(address)]

    def deliveries(self, address: str) -> list[tuple[float, EmailMessage]]:
        """(delivery time as a Unix timestamp, message) for the address's INBOX, oldest first.

        Read straight from the Maildir's ``new`` and ``cur`` folders; a folder Dovecot has not made yet,
        or a file it moved from ``new`` to ``cur`` while we looked, is simply not there yet."""
        found: list[tuple[str, EmailMessage]] = []
        for folder in ("new", "cur"):
            path = self.maildir(address) / folder
            try:
                names = os.listdir(path)
            except FileNotFoundError:
                continue
            for name in names:
                try:
                    raw = (path / name).read_bytes()
                except FileNotFoundError:
                    continue
                found.append((name, email.message_from_bytes(raw, policy=email.policy.default)))
        deliveries = []
        for name, message in sorted(found, key=lambda item: _delivery_order(item[0])):
            seconds, micros, _ = _delivery_order(name)
            deliveries.append((seconds + micros / 1e6, message))
        return deliveries


def _delivery_order(name: str) -> tuple[int, int, str]:
    """Dovecot names a Maildir file ``<seconds>.M<microseconds>P<pid>...``; the microseconds are not zero-padded."""
    match = re.match(r"(\d+)\.M(\d+)P", name)
    return (int(match.group(1)), int(match.group(2)), name) if match else (0, 0, name)


@dataclass
class Fault:
    reply: str
    after_delivery: bool = False
    sender: str | None = None
    """Only mail from this envelope sender trips the fault (so a learner's mail never does)."""


class LmtpRelay:
    """aiosmtpd handler: deliver over LMTP, keep what cannot be delivered yet, obey injected faults."""

    def __init__(self, lmtp_port: int) -> None:
        self.lmtp_port = lmtp_port
        self.faults: deque[Fault] = deque()
        self.answers: Counter[str] = Counter()
        self.answers_to: Counter[tuple[str, str]] = Counter()
        """(envelope sender, reply code) -> how often: what one test's bot was told."""
        self.accepted: list[bytes] = []
        self.delivered_at: dict[str, float] = {}
        """Message-ID -> when the server first took a mail carrying it (wall clock).

        Stamped the moment DATA has arrived, before the LMTP hand-off and before the ``250``: from
        then on the mail is delivered whatever becomes of the client, so a kill after this instant
        and before the client records the ``250`` is the one window SMTP cannot close.  Stamping
        after the hand-off would put a slow Dovecot's delay inside that window and misjudge it."""
        self.submissions: Counter[str] = Counter()
        """envelope sender -> messages it tried to submit (DATA), whatever the answer: a retry counts again."""
        self._retrying: set[asyncio.Task] = set()
        self._lock = threading.Lock()
        self.quit_gate: tuple[str, threading.Event] | None = None
        """(login, event): while set, that login's QUIT waits for the event -- a server slow to say goodbye."""
        self.quits_held = 0

    def _deliver(self, sender: str, recipient: str, content: bytes) -> None:
        # One recipient per LMTP transaction: LMTP answers DATA once per recipient, and
        # smtplib reads only one answer, so a second recipient would desynchronise it.
        with smtplib.LMTP("127.0.0.1", self.lmtp_port, timeout=HTTP_S) as lmtp:
            lmtp.sendmail(sender, [recipient], content)

    async def _deliver_or_queue(self, sender: str, recipients: list[str], content: bytes) -> None:
        for recipient in recipients:
            try:
                await asyncio.to_thread(self._deliver, sender, recipient, content)
            except (OSError, smtplib.SMTPException):
                task = asyncio.create_task(self._retry(sender, recipient, content))
                self._retrying.add(task)
                task.add_done_callback(self._retrying.discard)

    async def _retry(self, sender: str, recipient: str, content: bytes) -> None:
        while True:
            await asyncio.sleep(0.1)
            try:
                await asyncio.to_thread(self._deliver, sender, recipient, content)
                return
            except (OSError, smtplib.SMTPException):
                continue

    def _take_fault(self, sender: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.sender is None or fault.sender.lower() == (sender or "").lower():
                    self.faults.remove(fault)
                    return fault
        return None

    async def handle_QUIT(self, server, session, envelope) -> str:
        gate, auth = self.quit_gate, session.auth_data
        if gate is not None and getattr(auth, "login", b"").decode().lower() == gate[0]:
            with self._lock:
                self.quits_held += 1
            await asyncio.to_thread(gate[1].wait, HTTP_S)
        return "221 Bye"

    async def handle_DATA(self, server, session, envelope) -> str:
        self.submissions[(envelope.mail_from or "").lower()] += 1
        fault = self._take_fault(envelope.mail_from)
        if fault is not None and not fault.after_delivery:
            self.answers[fault.reply[:3]] += 1
            self.answers_to[(envelope.mail_from.lower(), fault.reply[:3])] += 1
            return fault.reply
        content = envelope.original_content or envelope.content
        message_id = str(email.message_from_bytes(content, policy=email.policy.default).get("Message-ID", ""))
        self.delivered_at.setdefault(message_id, time.time())
        self.accepted.append(content)
        await self._deliver_or_queue(envelope.mail_from, list(envelope.rcpt_tos), content)
        if fault is not None:
            self.answers[fault.reply[:3] + "+delivered"] += 1
            return fault.reply
        self.answers["250"] += 1
        return "250 2.0.0 OK: queued"

    @property
    def queued(self) -> int:
        return len(self._retrying)


class SmtpPeer:
    """aiosmtpd with AUTH required, relaying to Dovecot's LMTP, in its own thread."""

    def __init__(self, lmtp_port: int, cert: Path, key: Path) -> None:
        self.port, self.starttls_port, self.tls_port = free_port(), free_port(), free_port()
        self.relay = LmtpRelay(lmtp_port)
        self.logins: Counter[str] = Counter()
        self.cert, self.key = cert, key
        self._controllers: list = []

    def _authenticate(self, server, session, envelope, mechanism, auth_data):
        from aiosmtpd.smtp import AuthResult, LoginPassword

        if isinstance(auth_data, LoginPassword) and auth_data.password.decode() == PASSWORD:
            self.logins[auth_data.login.decode()] += 1
            return AuthResult(success=True, auth_data=auth_data)
        return AuthResult(success=False, handled=False)

    def start(self) -> None:
        try:
            from aiosmtpd.controller import Controller
        except ImportError:
            raise AssertionError("aiosmtpd is not installed: pip install -e '.[test]'") from None

        class QuietController(Controller):
            def factory(self):
                # AUTH without TLS is this loopback peer's point; aiosmtpd warns about it per connection.
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message="Requiring AUTH while not requiring TLS")
                    return super().factory()

        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(self.cert, self.key)
        common = dict(hostname="127.0.0.1", authenticator=self._authenticate, auth_required=True, ready_timeout=HANG_S)
        self._controllers = [
            QuietController(self.relay, port=self.port, auth_require_tls=False, **common),
            QuietController(self.relay, port=self.starttls_port, tls_context=tls, require_starttls=True, **common),
            # implicit TLS: aiosmtpd counts only STARTTLS as "TLS" for AUTH, so it is told not to insist
            QuietController(self.relay, port=self.tls_port, ssl_context=tls, auth_require_tls=False, **common),
        ]
        for controller in self._controllers:
            controller.start()

    def stop(self) -> None:
        for controller in self._controllers:
            controller.stop()
        self._controllers = []

    def hold_quit(self, login: str) -> None:
        """Make ``login``'s QUITs wait until :meth:`release_quit` (or ``HTTP_S``): mail taken, goodbye pending."""
        self.relay.quit_gate = (login.lower(), threading.Event())

    def release_quit(self) -> None:
        gate, self.relay.quit_gate = self.relay.quit_gate, None
        if gate is not None:
            gate[1].set()

    def fail_next(self, reply: str, *, sender: str | None = None, after_delivery: bool = False) -> None:
        """The next DATA (from ``sender``, when given) is answered with ``reply`` (e.g. ``451 4.7.1 slow down``)."""
        with self.relay._lock:
            self.relay.faults.append(Fault(reply, after_delivery, sender))


class EmailPeer:
    """Dovecot plus the SMTP server, started together; what the tests and harnesses are handed."""

    def __init__(self, root: Path) -> None:
        self.dovecot = Dovecot(root)
        self.smtp = SmtpPeer(self.dovecot.lmtp_port, self.dovecot.cert, self.dovecot.key)
        self.ca_file = self.dovecot.cert
        """The self-signed certificate both servers present; a client trusts it as its CA."""
        self.password = PASSWORD
        self.domain = DOMAIN
        self._serial = 0

    @property
    def imap_port(self) -> int:
        return self.dovecot.imap_port

    @property
    def smtp_port(self) -> int:
        return self.smtp.port

    @property
    def imaps_port(self) -> int:
        return self.dovecot.imaps_port

    def start(self) -> EmailPeer:
        self.dovecot.start()
        self.smtp.start()
        return self

    def stop(self) -> None:
        self.smtp.stop()
        self.dovecot.stop()

    def new_address(self, prefix: str) -> str:
        """A fresh, never used address (Dovecot makes its mailbox on first delivery)."""
        self._serial += 1
        return f"{prefix}{self._serial}-{os.getpid()}-{time.monotonic_ns() % 10**9}@{DOMAIN}"

    def send(self, message: EmailMessage, *, login: str) -> None:
        """Submit a message through the SMTP server, authenticated as ``login``."""
        with smtplib.SMTP("127.0.0.1", self.smtp.port, timeout=HTTP_S) as client:
            client.login(login, PASSWORD)
            client.send_message(message)

    def received(self, address: str) -> list[EmailMessage]:
        return self.dovecot.received(address)
