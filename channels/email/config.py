"""EmailConfig: one mailbox the partner reads over IMAP and answers from over SMTP.

Every endpoint is configurable, because teachers bring their own provider
(Gmail, Outlook, a school's server).  ``security = none`` is refused for
anything but a loopback host: it exists for the test peer, never for a
password crossing a network in clear text.  IMAP is implicit TLS only
(aioimaplib has no STARTTLS, ADR 0011); ``imap_security: starttls`` is refused
with that reason rather than a bare list of values.
"""

from __future__ import annotations

import ipaddress
import ssl
from enum import Enum
from pathlib import Path

from pydantic import Field, ValidationInfo, field_validator

from gateway.core.config import AccountConfig, EnvSecret


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


class ImapSecurity(str, Enum):
    TLS = "tls"  # implicit TLS, port 993 (aioimaplib has no IMAP STARTTLS)
    NONE = "none"  # loopback only


class SmtpSecurity(str, Enum):
    STARTTLS = "starttls"  # submission port 587
    TLS = "tls"  # implicit TLS, port 465
    NONE = "none"  # loopback only


class EmailConfig(AccountConfig):
    address: str = Field(pattern=r"^[^@\s]+@[^@\s]+$")
    """The partner's own address: mail is sent from it, and mail from it is never answered."""
    display_name: str = ""
    username: str | None = None
    """IMAP and SMTP login; the address when unset."""
    password: EnvSecret
    """An app password, given as ``env:NAME``."""

    imap_host: str
    imap_port: int = Field(default=993, ge=1, le=65535)
    imap_security: ImapSecurity = ImapSecurity.TLS
    mailbox: str = "INBOX"

    smtp_host: str
    smtp_port: int = Field(default=587, ge=1, le=65535)
    smtp_security: SmtpSecurity = SmtpSecurity.STARTTLS
    smtp_username: str | None = None
    """SMTP login when it differs from the IMAP one."""
    smtp_password: EnvSecret | None = None
    tls_ca_file: Path | None = None
    """A CA certificate to trust instead of the system's (a school server with its own certificate authority)."""

    idle: bool = True
    """Wait for new mail with IMAP IDLE when the server offers it; poll otherwise."""
    idle_renew_s: float = Field(default=60.0, gt=0, le=80)
    """Re-issue IDLE this often: servers drop clients idle for 30 min, and the supervisor
    wants a sign of life within 90 s, which the reader gives between two IDLEs."""
    poll_interval_s: float = Field(default=30.0, gt=0, le=80)
    timeout_s: float = Field(default=30.0, gt=0)

    allowed_senders: tuple[str, ...] = ()
    """Addresses that may write to the partner; with ``allowed_domains``, empty means anyone."""
    allowed_domains: tuple[str, ...] = ()
    max_mails_per_sender_hour: int = Field(default=30, ge=1)
    """Loop protection: mail from one sender beyond this many in an hour is not answered."""
    max_message_bytes: int = Field(default=26214400, ge=1024)
    """Mail larger than this is not downloaded; it is dropped with the reason."""
    max_fetch_attempts: int = Field(default=5, ge=1)
    """Runs in a row that may break off while fetching the same mail before it is passed over
    (recorded with the reason, left in the mailbox) so that the mail after it is answered."""
    copy_to_self: bool = False
    """Bcc every reply to the partner's own address, so the mailbox holds both sides of each thread."""
    new_subject: str = "A message from your study partner"
    """Subject of mail the partner starts itself (reminders), not replying to anything."""

    @field_validator("imap_security", mode="before")
    @classmethod
    def _no_imap_starttls(cls, value: object) -> object:
        if value == "starttls":
            raise ValueError(
                "IMAP with STARTTLS is not supported (aioimaplib has no STARTTLS); "
                "use imap_security: tls with imap_port: 993, which every provider serves"
            )
        return value

    @field_validator("imap_security", "smtp_security")
    @classmethod
    def _clear_text_on_loopback_only(cls, security: ImapSecurity | SmtpSecurity, info: ValidationInfo) -> ImapSecurity | SmtpSecurity:
        kind = info.field_name.removesuffix("_security") if info.field_name else "imap"
        host = info.data.get(f"{kind}_host")  # validated before: the hosts are declared above the securities
        if security.value == "none" and host is not None and not is_loopback(host):
            choices = "tls" if kind == "imap" else "starttls (port 587) or tls (port 465)"
            raise ValueError(f"{kind}_security none sends the password in clear text; use {choices} for {host}")
        return security

    @field_validator("tls_ca_file")
    @classmethod
    def _readable(cls, path: Path | None) -> Path | None:
        if path is not None and not path.is_file():
            raise ValueError(f"tls_ca_file {path} is not a readable file")
        return path

    def tls_context(self) -> ssl.SSLContext | None:
        """The context both connections verify servers with; None means the system's defaults."""
        if self.tls_ca_file is None:
            return None
        return ssl.create_default_context(cafile=str(self.tls_ca_file))

    @property
    def login(self) -> str:
        return self.username or self.address

    @property
    def domain(self) -> str:
        return self.address.rsplit("@", 1)[1]
