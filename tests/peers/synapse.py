"""A real Synapse homeserver on loopback, for the Matrix channel's tests.

Synapse runs from its own venv (``deploy/peers/synapse.sh`` makes it; its
Twisted stack never enters the app's env), on SQLite in a temp dir, with no
federation, no key servers, and rate limits opened wide -- the contract
suite injects its 429s through ``tests/peers/matrix_proxy.py`` instead, so
the server itself stays the truth about what was posted.

Users are registered through the shared-secret admin API
(``/_synapse/admin/v1/register``, an HMAC-SHA1 over nonce, name, password and
admin flag), which hands back an access token directly.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.peers import stop_process
from tests.waits import HANG_S, HTTP_S

ROOT = Path(__file__).resolve().parents[2]
SHARED_SECRET = "partners-test-shared-secret"
SERVER_NAME = "localhost"


def synapse_python() -> Path:
    """The Synapse venv's interpreter; an AssertionError with the fix when it is missing."""
    venv = Path(os.environ.get("SYNAPSE_VENV") or ROOT / ".venv-synapse")
    python = venv / "bin" / "python"
    if not python.exists():
        raise AssertionError(
            f"no Synapse venv at {venv}: create it with `bash deploy/peers/synapse.sh` "
            "(or point SYNAPSE_VENV at one that has matrix-synapse installed)"
        )
    return python


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _homeserver_yaml(port: int) -> str:
    wide = "{per_second: 10000, burst_count: 10000}"
    return f"""\
server_name: "{SERVER_NAME}"
public_baseurl: "http://127.0.0.1:{port}/"
listeners:
  - {{port: {port}, bind_addresses: ["127.0.0.1"], type: http, tls: false, x_forwarded: false,
     resources: [{{names: [client], compress: false}}]}}
database: {{name: sqlite3, args: {{database: ./homeserver.db}}}}
media_store_path: ./media_store
signing_key_path: ./signing.key
log_config: ./log.yaml
registration_shared_secret: "{SHARED_SECRET}"
macaroon_secret_key: "partners-test-macaroon"
form_secret: "partners-test-form"
report_stats: false
trusted_key_servers: []
suppress_key_server_warning: true
federation_domain_whitelist: []
presence: {{enabled: false}}
bcrypt_rounds: 4
max_upload_size: 60M
enable_authenticated_media: true
rc_message: {wide}
rc_registration: {wide}
rc_login: {{address: {wide}, account: {wide}, failed_attempts: {wide}}}
rc_joins: {{local: {wide}, remote: {wide}}}
rc_joins_per_room: {wide}
rc_invites: {{per_room: {wide}, per_user: {wide}, per_issuer: {wide}}}
rc_admin_redaction: {wide}
rc_media_create: {wide}
"""


_LOG_YAML = """\
version: 1
formatters: {plain: {format: '%(asctime)s %(name)s %(levelname)s %(message)s'}}
handlers: {file: {class: logging.FileHandler, formatter: plain, filename: ./synapse.log}}
root: {level: WARNING, handlers: [file]}
disable_existing_loggers: false
"""


@dataclass
class MatrixAccount:
    user_id: str
    access_token: str
    device_id: str
    password: str


class SynapsePeer:
    """One Synapse process; started once per test session, stopped by its pid."""

    def __init__(self, workdir: Path, port: int, process: subprocess.Popen) -> None:
        self.workdir, self.port, self.process = workdir, port, process
        self.url = f"http://127.0.0.1:{port}"

    @classmethod
    def start(cls, workdir: Path, *, timeout: float = 2 * HANG_S) -> SynapsePeer:
        python = synapse_python()
        workdir.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        (workdir / "homeserver.yaml").write_text(_homeserver_yaml(port))
        (workdir / "log.yaml").write_text(_LOG_YAML)
        # An ed25519 signing key is any 32-byte seed, written as "ed25519 <key id> <unpadded base64>".
        seed = base64.b64encode(os.urandom(32)).decode().rstrip("=")
        (workdir / "signing.key").write_text(f"ed25519 a_test {seed}\n")
        output = open(workdir / "stdout.log", "wb")
        process = subprocess.Popen(
            [str(python), "-m", "synapse.app.homeserver", "-c", "homeserver.yaml"],
            cwd=workdir, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
        )
        output.close()
        peer = cls(workdir, port, process)
        peer._wait_ready(timeout)
        return peer

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(trust_env=False) as http:
            while True:
                if self.process.poll() is not None:
                    raise AssertionError(f"Synapse exited with {self.process.returncode} before it was ready:\n{self.log_tail()}")
                try:
                    if http.get(f"{self.url}/_matrix/client/versions", timeout=2).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError(f"Synapse did not answer within {timeout:g} s:\n{self.log_tail()}")
                time.sleep(0.05)

    def log_tail(self) -> str:
        parts = []
        for name in ("stdout.log", "synapse.log"):
            path = self.workdir / name
            if path.exists():
                parts.append(path.read_text(errors="replace")[-3000:])
        return "\n".join(parts)

    def register(self, username: str, password: str = "", *, admin: bool = False) -> MatrixAccount:
        """Register a user with the shared secret; returns its MXID, access token and device."""
        password = password or f"pw-{username}"
        endpoint = f"{self.url}/_synapse/admin/v1/register"
        with httpx.Client(trust_env=False, timeout=HTTP_S) as http:
            nonce = http.get(endpoint).json()["nonce"]
            mac = hmac.new(SHARED_SECRET.encode(), digestmod=hashlib.sha1)
            mac.update(b"\x00".join([nonce.encode(), username.encode(), password.encode(), b"admin" if admin else b"notadmin"]))
            response = http.post(endpoint, json={
                "nonce": nonce, "username": username, "password": password, "admin": admin, "mac": mac.hexdigest(),
            })
        if response.status_code != 200:
            raise AssertionError(f"registering {username} failed: {response.status_code} {response.text}")
        body = response.json()
        return MatrixAccount(body["user_id"], body["access_token"], body["device_id"], password)

    def stop(self) -> None:
        stop_process(self.process)
