"""Does a mailbox work?  Its settings' shape, then an IMAP login (EXAMINE) and an SMTP EHLO + AUTH.

Neither side changes anything: EXAMINE opens the mailbox read-only (no flag
moves, no mail is marked read) and the SMTP session ends with QUIT before any
mail.  Each refusal is said with the setting to look at, never the password.
"""

from __future__ import annotations

import ssl

from channels.email.config import EmailConfig
from channels.email.imap import ImapSession
from channels.email.smtp import SmtpSubmitter
from gateway.core.errors import AuthFailed, GatewayError, NotFound, PeerUnreachable, PlatformError
from gateway.core.probes import ProbeResult, Problem
from gateway.endpoints import placeholder_host

APP_PASSWORD = ("check username and the password's variable; Gmail and Outlook need an app password "
                "(account security, App passwords), not the account's own password")


def check_settings(settings: EmailConfig) -> list[Problem]:
    problems = []
    if not settings.password.get_secret_value().strip():
        problems.append(Problem(message="the password is empty (its environment variable holds nothing)",
                                fix="put the mailbox's app password in the variable that password: names (env:NAME)"))
    for kind, host in (("imap_host", settings.imap_host), ("smtp_host", settings.smtp_host)):
        if example := placeholder_host(host):
            problems.append(Problem(message=f"{kind} still names the example host {example}",
                                    fix=f"set {kind} to your provider's server (Gmail: {kind[:4]}.gmail.com)"))
    return problems


def _problem(error: GatewayError, side: str, host: str, login: str) -> Problem:
    if isinstance(error, AuthFailed):
        return Problem(message=f"the {side} server {host} refused the login for {login}", fix=APP_PASSWORD)
    if isinstance(error, NotFound):
        return Problem(message=f"{error.detail} on {host}", fix="set mailbox: to a folder that exists (usually INBOX)")
    detail = error.detail if isinstance(error, PlatformError) else str(error)
    if isinstance(error, PeerUnreachable):
        port = "imap_port (993 with imap_security tls)" if side == "IMAP" else "smtp_port (587 with starttls, 465 with tls)"
        return Problem(message=f"nothing answers for {side} at {error.endpoint} ({error.why})",
                       fix=f"check the network, {side.lower()}_host and {port}")
    return Problem(message=f"the {side} server {host} answered: {detail}",
                   fix=f"check {side.lower()}_security and {side.lower()}_port; try again if the server was busy")


async def probe_mailbox(settings: EmailConfig, tls: ssl.SSLContext | None) -> ProbeResult:
    checked = (f"IMAP {settings.imap_host}:{settings.imap_port} and SMTP {settings.smtp_host}:{settings.smtp_port} "
               f"as {settings.login}")
    problems = []
    imap = ImapSession(settings, tls)
    try:
        await imap.examine()
    except GatewayError as error:
        problems.append(_problem(error, "IMAP", settings.imap_host, settings.login))
    finally:
        await imap.close()
    try:
        await SmtpSubmitter(settings, tls).login()
    except GatewayError as error:
        problems.append(_problem(error, "SMTP", settings.smtp_host, settings.smtp_username or settings.login))
    return ProbeResult(checked=checked, problems=tuple(problems))
