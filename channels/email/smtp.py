"""SMTP submission with aiosmtplib, and the translation of SMTP replies into the gateway's error tree.

One connection per send: replies are minutes apart per learner and pacing
spaces them further, so a held connection would mostly be one a provider has
already timed out.  Translation, most specific first::

    530/534/535/538, login refused        -> AuthFailed
    421/450/451/452 saying rate/limit/too many/try again
                                          -> RateLimited (retry_after from "in N s", else 60 s)
    other 4xx                             -> PeerUnavailable
    refused, dropped, timed out           -> PeerUnreachable, naming host:port in plain words
    550/551/553 5.1.x (no such mailbox)   -> NotFound
    other 5xx                             -> BadRequest

A disconnect or timeout *after* the message data went out is ambiguous: the
server may have queued it.  It is still reported as PeerUnavailable, so the
outbound path retries; the retry carries the same Message-ID (ADR 0011).

The caller hears that the server took the mail the moment its ``250`` arrives,
before QUIT: a slow or hung goodbye must not widen the window in which a crash
leaves a sent mail unrecorded (and so sends it again after the restart).
"""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import Awaitable, Callable
from email.message import EmailMessage

import aiosmtplib

from channels.email.config import EmailConfig, SmtpSecurity
from gateway.core.errors import AuthFailed, BadRequest, NotFound, PeerUnavailable, PeerUnreachable, PlatformError, RateLimited
from gateway.endpoints import why_unreachable

PLATFORM = "email"
RATE_WORDS = re.compile(r"rate|limit|too many|try again|slow down|throttl", re.I)
RETRY_IN = re.compile(r"(?:in|after)\s+(\d+(?:\.\d+)?)\s*(?:s\b|sec|seconds)", re.I)
DEFAULT_RETRY_S = 60.0
log = logging.getLogger(__name__)


def translate_reply(code: int, text: str, stage: str) -> PlatformError:
    said = f"SMTP {stage}: {text.strip()[:300]}"
    if code in (530, 534, 535, 538):
        return AuthFailed(PLATFORM, f"{said}: check username and the app password" if stage == "login" else said, code=code)
    if code in (421, 450, 451, 452) and RATE_WORDS.search(text):
        match = RETRY_IN.search(text)
        # RateLimited words its own message; the server's reply rides in the code so the log shows it
        return RateLimited(PLATFORM, float(match.group(1)) if match else DEFAULT_RETRY_S, code=f"{code} {text.strip()[:200]}")
    if 400 <= code < 500:
        return PeerUnavailable(PLATFORM, said, code=code)
    if code in (550, 551, 553) and re.search(r"\b5\.1\.\d\b", text):
        return NotFound(PLATFORM, said, code=code)
    return BadRequest(PLATFORM, said, code=code)


def translate(error: Exception) -> PlatformError:
    if isinstance(error, aiosmtplib.SMTPRecipientsRefused):
        first = error.recipients[0] if error.recipients else None
        return translate_reply(first.code, first.message, "recipient") if first else BadRequest(PLATFORM, str(error))
    if isinstance(error, aiosmtplib.SMTPResponseException) and not isinstance(error, aiosmtplib.SMTPConnectResponseError):
        stage = "login" if isinstance(error, aiosmtplib.SMTPAuthenticationError) else "send"
        return translate_reply(error.code, error.message, stage)
    if isinstance(error, aiosmtplib.SMTPNotSupported):
        return BadRequest(PLATFORM, f"SMTP server cannot do what the config asks: {error}")
    return PeerUnavailable(PLATFORM, f"SMTP {type(error).__name__}: {error}")


class SmtpSubmitter:
    """Submits composed mail for one account."""

    def __init__(self, settings: EmailConfig, tls_context: ssl.SSLContext | None = None) -> None:
        self.settings = settings
        self.tls_context = tls_context

    def _client(self) -> aiosmtplib.SMTP:
        s = self.settings
        return aiosmtplib.SMTP(
            hostname=s.smtp_host, port=s.smtp_port, timeout=s.timeout_s,
            use_tls=s.smtp_security is SmtpSecurity.TLS, start_tls=s.smtp_security is SmtpSecurity.STARTTLS,
            tls_context=self.tls_context,
        )

    def _translate(self, error: Exception) -> PlatformError:
        """A failure to reach the server names it and the settings to check; the rest as ``translate``."""
        s = self.settings
        why = None if isinstance(error, aiosmtplib.SMTPResponseException) else why_unreachable(error)
        if why is not None:
            return PeerUnreachable(PLATFORM, f"{s.smtp_host}:{s.smtp_port}", why, action="SMTP",
                                   check="the network, smtp_host, smtp_port and smtp_security")
        return translate(error)

    async def login(self) -> None:
        """Connect, EHLO (and STARTTLS), AUTH, QUIT: the probe's check, which sends nothing."""
        s = self.settings
        client = self._client()
        try:
            async with client:
                await client.login(s.smtp_username or s.login, (s.smtp_password or s.password).get_secret_value())
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as error:
            raise self._translate(error) from error

    async def submit(self, mail: EmailMessage, recipients: list[str], accepted: Callable[[], Awaitable[None]]) -> None:
        """Send ``mail``; ``accepted`` runs once the server has taken it for the learner, before QUIT."""
        s = self.settings
        client = self._client()
        password = (s.smtp_password or s.password).get_secret_value()
        try:
            async with client:
                await client.login(s.smtp_username or s.login, password)
                refused, _ = await client.send_message(mail, sender=s.address, recipients=recipients)
                if recipients[0] in refused:  # the learner refused while our own copy went through
                    reply = refused[recipients[0]]
                    raise translate_reply(reply.code, reply.message, "recipient")
                await accepted()
        except (aiosmtplib.SMTPException, OSError, TimeoutError) as error:
            raise self._translate(error) from error
