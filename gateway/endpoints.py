"""A server a channel or a model talks to, as an operator reads it: where it is and why it cannot be reached.

Every SDK words a failed connection its own way -- httpx says "All connection
attempts failed", aiohttp "Cannot connect to host 127.0.0.1:9 ssl:default
[Connect call failed ...]", aiosmtplib "Error connecting to ... on port 9".
Underneath each is the same operating-system error, so one function walks the
exception's causes to it and says it in plain words; each channel's transport
then writes the reason once, at its boundary, naming its own endpoint and fix::

    cannot reach https://api.telegram.org (connection refused): check the network or api_url

:func:`placeholder_host` catches the other first-hour mistake: a host copied
from an example (``https://YOUR.HS``, ``imap.example.org``) and never replaced.
"""

from __future__ import annotations

import asyncio
import errno
import re
import socket
import ssl
from collections.abc import Iterator
from urllib.parse import urlsplit

_REFUSED = {errno.ECONNREFUSED}
_UNREACHABLE = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL}
_RESET = {errno.ECONNRESET, errno.ECONNABORTED, errno.EPIPE}
_EXAMPLE_DOMAINS = re.compile(r"(^|\.)(example\.(com|net|org)|[^.]+\.(example|invalid))$", re.IGNORECASE)
_PLACEHOLDER_LABEL = re.compile(r"^(YOUR[A-Z_-]*|HS)$|^(?i:your)([-_].*)?$|^<.*>$|^\{.*\}$|^(\.\.\.|…)$")


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def why_unreachable(error: BaseException) -> str | None:
    """Plain words for a failed connection found anywhere in ``error``'s causes; None when it is not one."""
    for cause in _causes(error):
        if isinstance(cause, ssl.SSLCertVerificationError):
            return "its TLS certificate is not trusted"
        if isinstance(cause, ssl.SSLError):
            return "the TLS handshake failed: is it the right port for TLS?"
        if isinstance(cause, socket.gaierror):
            return "the name does not resolve"
        if isinstance(cause, ConnectionRefusedError) or getattr(cause, "errno", None) in _REFUSED:
            return "connection refused"
        if getattr(cause, "errno", None) in _UNREACHABLE:
            return "no route to it"
        if isinstance(cause, (ConnectionResetError, BrokenPipeError)) or getattr(cause, "errno", None) in _RESET:
            return "the connection was dropped"
        if isinstance(cause, (TimeoutError, asyncio.TimeoutError)) or "timeout" in type(cause).__name__.lower():
            return "no answer in time"
        name = type(cause).__name__
        if name in ("ServerDisconnectedError", "RemoteProtocolError", "ReadError", "SMTPServerDisconnected"):
            return "the connection was dropped"
    return None


def origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL: what an operator recognises, without paths that may hold tokens."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.hostname:
        return url
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def placeholder_host(host_or_url: str) -> str | None:
    """The host when it is an example left in place (``YOUR.HS``, ``matrix.example.org``), else None."""
    host = urlsplit(host_or_url).hostname if "://" in host_or_url else host_or_url.split(":")[0]
    if not host:
        return None
    original = host_or_url.split("://", 1)[-1].split("/")[0].split(":")[0]  # urlsplit lower-cases the host
    if _EXAMPLE_DOMAINS.search(host) or any(_PLACEHOLDER_LABEL.match(label) for label in original.split(".")):
        return original
    return None
