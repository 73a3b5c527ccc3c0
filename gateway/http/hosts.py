"""Which requests the gateway serves at all: its own host names, and no cross-site writes.

Two browser attacks reach a gateway on a learner's or teacher's machine:

* **DNS rebinding.**  A web page at ``evil.example`` re-points its own name to
  ``127.0.0.1``; the browser then lets the page read ``/status`` and
  ``/metrics`` as if same-origin.  The request still says ``Host: evil.example``,
  so a gateway that serves only the names it knows refuses it (421).  Known
  names: the loopback names, the address it is bound to, the host of
  ``http.public_url`` and ``http.allowed_hosts`` (``*.example.org`` matches
  sub-domains, ``*`` turns the check off).  A Host that is an IP address is
  always served: rebinding needs a *name* to re-point, so an address literal
  can only come from someone who reached that address directly -- which also
  keeps a gateway bound to ``0.0.0.0`` in a container reachable by its LAN IP.

* **Cross-site writes.**  Any page a learner visits can POST to the gateway.
  A browser tells where a request comes from: ``Sec-Fetch-Site`` (all current
  browsers) must be ``same-origin`` or ``none`` (typed by the user), and an
  ``Origin``, when sent, must be this Host or the public URL's origin.  A
  request with neither header is not from a browser page (a platform's
  webhook, ``curl``) and passes; those carry their own proof (signatures,
  the admin token).  Safe methods (GET, HEAD, OPTIONS) are not checked here.

Refusals are short JSON errors like every other answer of the app.  (Starlette's
``TrustedHostMiddleware`` answers in plain text and knows nothing of address
literals or origins, hence this small guard.)
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.http.responses import error_response

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_BINDS = ("", "0.0.0.0", "::")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
BROWSER_OWN_SITES = frozenset({"same-origin", "none"})


def host_name(authority: str) -> str:
    """``Example.org:8780`` -> ``example.org``; ``[::1]:8780`` -> ``::1`` (ports are not compared)."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        return authority[1:].split("]", 1)[0]
    if authority.count(":") == 1:
        return authority.split(":", 1)[0]
    return authority


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class AllowedHosts:
    names: frozenset[str]
    suffixes: tuple[str, ...] = ()
    """From ``*.example.org``: any name ending in ``.example.org``."""
    any_host: bool = False
    public_origins: frozenset[str] = frozenset()
    """``scheme://host[:port]`` of ``http.public_url``: a proxy in front may rewrite Host, the Origin stays."""

    @classmethod
    def of(cls, bind_host: str, public_url: str | None, extra: Iterable[str]) -> AllowedHosts:
        names = {*LOOPBACK_NAMES}
        if bind_host not in WILDCARD_BINDS:
            names.add(host_name(bind_host))
        origins: set[str] = set()
        if public_url:
            parts = urlsplit(public_url)
            if parts.hostname:
                names.add(parts.hostname.lower())
                origins.add(f"{parts.scheme}://{parts.netloc}".lower())
        suffixes: list[str] = []
        any_host = False
        for entry in extra:
            entry = entry.strip().lower()
            if entry == "*":
                any_host = True
            elif entry.startswith("*."):
                suffixes.append(entry[1:])
            elif entry:
                names.add(host_name(entry))
        return cls(frozenset(names), tuple(suffixes), any_host, frozenset(origins))

    def serves(self, authority: str) -> bool:
        name = host_name(authority)
        if self.any_host or name in self.names or _is_address(name):
            return True
        return any(name.endswith(suffix) for suffix in self.suffixes)


def cross_site(headers: Headers, allowed: AllowedHosts) -> str | None:
    """Why a state-changing request looks like it came from another site's page, or None."""
    site = headers.get("sec-fetch-site")
    if site is not None and site.lower() not in BROWSER_OWN_SITES:
        return f"Sec-Fetch-Site is {site}"
    origin = headers.get("origin")
    if origin is None:
        return None
    parts = urlsplit(origin.lower())
    if parts.netloc and parts.netloc == headers.get("host", "").lower():
        return None
    if f"{parts.scheme}://{parts.netloc}" in allowed.public_origins:
        return None
    return f"Origin {origin[:100]} is another site"


class HostGuard:
    """Refuses a foreign Host (421) and a cross-site write (403) before any route runs."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not self.allowed.serves(host):
            log.warning("http request refused reason=unknown host host=%r path=%s", host[:100], scope.get("path"))
            message = (f"this gateway does not serve the host {host_name(host)[:100]!r}; "
                       "add it to http.allowed_hosts (or set http.public_url)")
            await error_response(421, message)(scope, receive, send)
            return
        if scope.get("method", "GET") not in SAFE_METHODS:
            reason = cross_site(headers, self.allowed)
            if reason is not None:
                log.warning("http request refused reason=cross-site detail=%r path=%s", reason, scope.get("path"))
                error = "requests from another site's page are refused"
                await error_response(403, error)(scope, receive, send)
                return
        await self.app(scope, receive, send)
