"""``fetch_page``: read a public web page as plain text -- and nothing that is not public.

Off by default; a partner must enable it.  The guard against server-side
request forgery works on addresses, not names:

- only ``http`` and ``https`` URLs, without user info;
- the host is resolved (``loop.getaddrinfo``, or the injected resolver) and
  *every* address it resolves to must be public: loopback, private (RFC 1918,
  IPv6 ULA), link-local (cloud metadata at 169.254.169.254), multicast,
  reserved, unspecified and other non-global ranges are refused, including
  IPv4 addresses embedded in IPv6 (``::ffff:10.0.0.1``, 6to4, Teredo, NAT64);
- the request then goes to the checked address itself (URL host replaced by
  the IP, ``Host`` header and TLS SNI set to the name, so certificates are
  still verified against the name).  A second DNS answer cannot swap in an
  internal address between the check and the connect (DNS rebinding);
- redirects are followed by hand, at most ``max_redirects``, and each hop is
  checked the same way before it is requested;
- the body is read up to ``max_bytes`` (1 MB) and cut there; the text the
  model sees is capped at ``max_chars``.

``allowed_networks`` lists explicit exceptions (tests allow loopback so they
can run a server on it; an operator could allow an intranet wiki).  The
injected ``httpx.AsyncClient`` should be dedicated to this tool: its cookie
jar is shared by every fetch made through it.
"""

from __future__ import annotations

import asyncio
import codecs
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable, Sequence

import httpx
from pydantic import Field

from brain.tools.base import Citation, Tool, ToolArguments, ToolContext, ToolResult
from brain.tools.builtin.page_text import html_to_text, tidy

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""``(host, port) -> addresses`` as strings; raises ``OSError`` when the name does not resolve."""

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("is_unspecified", "an unspecified address"),
    ("is_loopback", "a loopback address"),
    ("is_link_local", "a link-local address"),
    ("is_multicast", "a multicast address"),
    ("is_reserved", "a reserved address"),
    ("is_private", "a private address"),
)
_READABLE = {"application/xhtml+xml", "application/json", "application/xml"}
_HTML = {"text/html", "application/xhtml+xml"}


async def resolve_host(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, through the event loop's resolver."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def refusal(ip: IPAddress, allowed: Sequence[Network] = ()) -> str | None:
    """Why ``ip`` may not be fetched (``"a loopback address"``), or None when it may."""
    if any(ip.version == net.version and ip in net for net in allowed):
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return refusal(ip.ipv4_mapped, allowed)
        embedded = ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None and (inner := refusal(embedded, allowed)):
            return f"{inner} ({embedded}) wrapped in IPv6"
    for attribute, what in _CATEGORIES:
        if getattr(ip, attribute):
            return what
    if not ip.is_global:
        return "not a public address"
    return None


class _Refused(Exception):
    """A URL the guard will not fetch; the message is for the model."""


class FetchPageTool(Tool["FetchPageTool.Arguments"]):
    name = "fetch_page"
    description = (
        "Fetch a public web page (http or https) and read it as plain text. "
        "Use it for a link the learner shared or a page you need to check."
    )
    timeout_s = 20.0
    default_enabled = False

    class Arguments(ToolArguments):
        url: str = Field(min_length=1, max_length=2000, description="The full http(s) URL.")

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        resolver: Resolver = resolve_host,
        allowed_networks: Sequence[Network] = (),
        max_bytes: int = 1_000_000,
        max_chars: int = 12_000,
        max_redirects: int = 5,
        request_timeout_s: float = 10.0,
    ):
        self._http, self._resolver, self._allowed = http, resolver, tuple(allowed_networks)
        self.max_bytes, self.max_chars, self.max_redirects = max_bytes, max_chars, max_redirects
        self._timeout = httpx.Timeout(request_timeout_s)

    async def run(self, args: Arguments, context: ToolContext) -> ToolResult:
        try:
            url = httpx.URL(args.url)
        except (httpx.InvalidURL, ValueError):
            return ToolResult.error(f"Not fetched: {args.url!r} is not a valid URL.")
        try:
            return await self._fetch(url)
        except _Refused as refused:
            logger.info("fetch refused partner=%s reason=%r", context.partner, str(refused))
            return ToolResult.error(f"Not fetched: {refused}.")
        except httpx.TimeoutException:
            return ToolResult.error(f"Not fetched: the site did not answer within {self._timeout.read:g} s.")
        except httpx.HTTPError as error:
            logger.info("fetch failed partner=%s error=%s", context.partner, type(error).__name__)
            return ToolResult.error(f"Not fetched: the site could not be reached ({type(error).__name__}).")

    async def _fetch(self, url: httpx.URL) -> ToolResult:
        for _hop in range(self.max_redirects + 1):
            pinned, headers, extensions = await self._pin(url)
            request = self._http.build_request(
                "GET", pinned, headers=headers, extensions=extensions, timeout=self._timeout
            )
            response = await self._http.send(request, stream=True, follow_redirects=False)
            try:
                if response.is_redirect:
                    url = url.join(response.headers["location"])
                    continue
                return await self._read(url, response)
            finally:
                await response.aclose()
        raise _Refused(f"more than {self.max_redirects} redirects")

    async def _pin(self, url: httpx.URL) -> tuple[httpx.URL, dict[str, str], dict[str, str]]:
        """Check ``url``'s scheme and every address of its host; return the request to the checked address."""
        if url.scheme not in ("http", "https"):
            shown = f"{url.scheme}:" if url.scheme else "a URL without a scheme"
            raise _Refused(f"only http and https URLs can be fetched, not {shown}")
        if url.userinfo:
            raise _Refused("URLs with a user name or password are not fetched")
        host = url.raw_host.decode("ascii")
        if not host:
            raise _Refused("the URL has no host")
        port = url.port or (443 if url.scheme == "https" else 80)
        addresses = await self._addresses(host, port)
        for ip in addresses:
            reason = refusal(ip, self._allowed)
            if reason:
                named = f"{host} is" if str(ip) == host else f"{host} resolves to {ip},"
                raise _Refused(f"{named} {reason}; only public web pages can be fetched")
        headers = {
            "Host": url.netloc.decode("ascii"),
            "Accept": "text/html, text/plain;q=0.9, */*;q=0.1",
            "Accept-Encoding": "identity",  # no decompression bombs: the size cap counts real bytes
        }
        extensions = {"sni_hostname": host} if url.scheme == "https" else {}
        return url.copy_with(host=str(addresses[0])), headers, extensions

    async def _addresses(self, host: str, port: int) -> list[IPAddress]:
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            pass
        try:
            found = await self._resolver(host, port)
        except OSError:
            raise _Refused(f"{host} does not resolve to an address") from None
        addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in found]
        if not addresses:
            raise _Refused(f"{host} does not resolve to an address")
        return addresses

    async def _read(self, url: httpx.URL, response: httpx.Response) -> ToolResult:
        if response.status_code >= 400:
            return ToolResult.error(f"Not fetched: the site answered HTTP {response.status_code} for {url}.")
        mime = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if mime and not (mime.startswith("text/") or mime in _READABLE):
            return ToolResult.error(f"Not read: {url} is {mime}, not a web page or text.")
        body, cut = bytearray(), False
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self.max_bytes:
                del body[self.max_bytes :]
                cut = True
                break
        decoded = body.decode(_codec(response.charset_encoding), errors="replace")
        if mime in _HTML or (not mime and decoded.lstrip().startswith("<")):
            title, text = html_to_text(decoded)
        else:
            title, text = "", tidy(decoded)
        notes = [f"[page cut at {self.max_bytes:,} bytes]"] if cut else []
        if len(text) > self.max_chars:
            text = text[: self.max_chars]
            notes.append(f"[text cut at {self.max_chars:,} characters]")
        heading = f"{title}\n{url}" if title else str(url)
        body_text = text or "(the page has no readable text)"
        return ToolResult(
            text="\n\n".join([heading, body_text, *notes]),
            citations=[Citation(title=title or str(url), source=str(url))],
        )


def _codec(name: str | None) -> str:
    try:
        return codecs.lookup(name).name if name else "utf-8"
    except LookupError:
        return "utf-8"
