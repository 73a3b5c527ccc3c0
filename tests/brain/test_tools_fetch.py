"""fetch_page: refusals before any connection, and real fetches from a loopback server.

Names resolve through an injected table (``*.test``); a name or address not
in ``allowed_networks`` is refused before anything connects, so these tests
never leave 127.0.0.1.  Only the tests that fetch for real allow loopback.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from brain.tools.base import Citation, ToolContext
from brain.tools.builtin.fetch import FetchPageTool, refusal, resolve_host
from brain.tools.builtin.page_text import html_to_text
from gateway.core.config import PartnerConfig
from gateway.core.messages import Address, Conversation, ConversationKind, InboundMessage, Sender, Text
from gateway.core.turns import Role, Turn

LOOPBACK = [ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")]
NAMES = {
    "school.test": ["127.0.0.1"],
    "intranet.test": ["10.1.2.3"],
    "ula.test": ["fd12:3456::1"],
    "v6loop.test": ["::1"],
    "mapped.test": ["::ffff:192.168.0.10"],
    "mixed.test": ["93.184.216.34", "192.168.1.20"],
    "metadata.test": ["169.254.169.254"],
}


def table(extra: dict[str, list[str]] | None = None):
    """A resolver answering from ``NAMES`` (plus ``extra``) the way getaddrinfo fails for the rest."""
    names = {**NAMES, **(extra or {})}

    async def resolve(host: str, port: int) -> Sequence[str]:
        if host not in names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return names[host]

    return resolve


def make_context() -> ToolContext:
    address = Address(channel="telegram", account="default", conversation=Conversation(chat="alice", kind=ConversationKind.DIRECT))
    sender = Sender(user="alice")
    message = InboundMessage(event_id="e1", address=address, sender=sender, elements=(Text(text="hi"),), received_at=datetime.now(UTC))
    turn = Turn(partner=PartnerConfig(id="tutor", name="Tutor"), address=address, sender=sender, role=Role.OWNER, messages=[message])
    return ToolContext(partner="tutor", turn=turn, surface=frozenset({"fetch_page"}))


PAGE = b"""<!doctype html><html><head><title>Photosynthesis &amp; light</title>
<style>body { color: red }</style><script>alert("no")</script></head>
<body><nav><ul><li>Home</li><li>Biology</li></ul></nav>
<h1>Photosynthesis</h1><p>Plants turn   light into <b>sugar</b>.</p><noscript>enable js</noscript>
<p>Caf&eacute; &lt;3</p></body></html>"""


class PageServer:
    """A tiny HTTP/1.1 server on 127.0.0.1: a page, redirects, a big body, a slow answer."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            target = head[0].split(" ")[1]
            headers = {k.lower(): v for k, v in (line.split(": ", 1) for line in head[1:] if line)}
            self.requests.append((target, headers))
            status, extra, body = await self._route(target)
            lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close", *extra]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _route(self, target: str) -> tuple[int, list[str], bytes]:
        parts = urlsplit(target)
        query = parse_qs(parts.query)
        match parts.path:
            case "/page":
                return 200, ["Content-Type: text/html; charset=utf-8"], PAGE
            case "/plain":
                return 200, ["Content-Type: text/plain; charset=latin-1"], "na\xefve  text\n\n\n\nend".encode("latin-1")
            case "/redirect":
                return 302, [f"Location: {query['to'][0]}"], b""
            case "/loop":
                return 302, ["Location: /loop"], b""
            case "/big":
                return 200, ["Content-Type: text/plain"], b"a" * 3_000_000
            case "/image":
                return 200, ["Content-Type: image/png"], b"\x89PNG"
            case "/slow":
                await asyncio.sleep(5)
                return 200, ["Content-Type: text/plain"], b"late"
            case _:
                return 404, ["Content-Type: text/plain"], b"not found"


@pytest.fixture
async def server():
    peer = PageServer()
    await peer.start()
    yield peer
    await peer.stop()


@pytest.fixture
async def http():
    async with httpx.AsyncClient(trust_env=False) as client:
        yield client


def tool(http: httpx.AsyncClient, *, allow_loopback: bool = False, names=None, **options) -> FetchPageTool:
    allowed = LOOPBACK if allow_loopback else ()
    return FetchPageTool(http, resolver=table(names), allowed_networks=allowed, **options)


async def fetch(fetcher: FetchPageTool, url: str):
    return await fetcher.run(FetchPageTool.Arguments(url=url), make_context())


# --------------------------------------------------------------------------- the address policy


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.8.9.10", "a loopback address"),
        ("10.0.0.1", "a private address"),
        ("172.16.5.4", "a private address"),
        ("192.168.1.1", "a private address"),
        ("169.254.169.254", "a link-local address"),
        ("224.0.0.1", "a multicast address"),
        ("240.0.0.1", "a reserved address"),
        ("0.0.0.0", "an unspecified address"),
        ("100.64.0.1", "not a public address"),
        ("192.0.2.10", "a private address"),
        ("::1", "a loopback address"),
        ("::", "an unspecified address"),
        ("fd12:3456::1", "a private address"),
        ("fe80::1", "a link-local address"),
        ("ff02::1", "a multicast address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("::ffff:10.0.0.1", "a private address"),
        ("2002:7f00:1::", "a loopback address (127.0.0.1) wrapped in IPv6"),
        ("64:ff9b::a00:1", "a private address (10.0.0.1) wrapped in IPv6"),
        ("93.184.216.34", None),
        ("2606:4700:4700::1111", None),
        ("::ffff:93.184.216.34", None),
    ],
)
def test_refusal(address, why):
    assert refusal(ipaddress.ip_address(address)) == why


def test_allowed_networks_are_explicit_exceptions():
    assert refusal(ipaddress.ip_address("127.0.0.1"), LOOPBACK) is None
    assert refusal(ipaddress.ip_address("::ffff:127.0.0.1"), LOOPBACK) is None
    assert refusal(ipaddress.ip_address("10.0.0.1"), LOOPBACK) == "a private address"


# --------------------------------------------------------------------------- refused before connecting


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("file:///etc/passwd", "only http and https URLs can be fetched, not file:"),
        ("ftp://school.test/notes.txt", "not ftp:"),
        ("gopher://school.test/", "not gopher:"),
        ("school.test/page", "not a URL without a scheme"),
        ("http://intranet.test/wiki", "intranet.test resolves to 10.1.2.3, a private address"),
        ("http://ula.test/", "ula.test resolves to fd12:3456::1, a private address"),
        ("http://v6loop.test/", "v6loop.test resolves to ::1, a loopback address"),
        ("http://mapped.test/", "mapped.test resolves to ::ffff:c0a8:a, a private address"),
        ("http://mixed.test/", "mixed.test resolves to 192.168.1.20, a private address"),
        ("http://metadata.test/latest/meta-data/", "a link-local address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://[::1]:8080/", "::1 is a loopback address"),
        ("http://[fd00::5]/", "fd00::5 is a private address"),
        ("http://nowhere.test/", "nowhere.test does not resolve"),
        ("http://user:pw@school.test/", "user name or password"),
        ("http://[::1/", "not a valid URL"),
    ],
)
async def test_refused_urls(http, url, why):
    result = await fetch(tool(http), url)
    assert result.is_error
    assert why in result.text
    assert result.text.startswith("Not fetched:")


async def test_loopback_is_refused_by_default_and_nothing_connects(http, server):
    fetcher = FetchPageTool(http)  # the real resolver, no exceptions
    for url in (server.url("/page"), server.url("/page", host="localhost"), server.url("/page", host="127.1")):
        result = await fetch(fetcher, url)
        assert result.is_error and "a loopback address" in result.text, url
    assert server.requests == []


async def test_the_system_resolver_answers_for_localhost():
    assert {ipaddress.ip_address(a).is_loopback for a in await resolve_host("localhost", 80)} == {True}


# --------------------------------------------------------------------------- fetching from loopback, allowed explicitly


async def test_a_page_is_fetched_as_text(http, server):
    result = await fetch(tool(http, allow_loopback=True), server.url("/page"))
    assert not result.is_error
    heading, text = result.text.split("\n\n", 1)
    assert heading == f"Photosynthesis & light\n{server.url('/page')}"
    assert text == "- Home\n- Biology\n\nPhotosynthesis\n\nPlants turn light into sugar.\n\nCafé <3"
    assert "alert" not in result.text and "color" not in result.text and "enable js" not in result.text
    assert result.citations == [Citation("Photosynthesis & light", server.url("/page"))]


async def test_the_connection_goes_to_the_checked_address_with_the_name_as_host(http, server):
    result = await fetch(tool(http, allow_loopback=True), server.url("/page", host="school.test"))
    assert not result.is_error
    ((target, headers),) = server.requests
    assert target == "/page"
    assert headers["host"] == f"school.test:{server.port}"
    assert headers["accept-encoding"] == "identity"
    assert server.url("/page", host="school.test") in result.text


async def test_plain_text_is_decoded_with_its_charset(http, server):
    result = await fetch(tool(http, allow_loopback=True), server.url("/plain"))
    assert result.text == f"{server.url('/plain')}\n\nnaïve text\n\nend"


async def test_a_redirect_to_a_private_address_is_refused(http, server):
    fetcher = tool(http, allow_loopback=True)
    targets = ("http://intranet.test/admin", "http://169.254.169.254/latest/meta-data/", "file:///etc/passwd")
    for target in targets:
        result = await fetch(fetcher, server.url(f"/redirect?to={target}"))
        assert result.is_error and "Not fetched:" in result.text, target
    assert [t for t, _ in server.requests] == [f"/redirect?to={t}" for t in targets]


async def test_every_hop_is_checked_against_the_same_exceptions(http, server):
    only_this_host = FetchPageTool(http, resolver=table(), allowed_networks=[ipaddress.ip_network("127.0.0.1/32")])
    result = await fetch(only_this_host, server.url(f"/redirect?to=http://127.0.0.2:{server.port}/page"))
    assert result.is_error and "127.0.0.2 is a loopback address" in result.text
    assert len(server.requests) == 1


async def test_relative_redirects_are_followed_and_rechecked(http, server):
    result = await fetch(tool(http, allow_loopback=True), server.url("/redirect?to=/page", host="school.test"))
    assert not result.is_error and "Photosynthesis" in result.text
    assert [h["host"] for _, h in server.requests] == [f"school.test:{server.port}"] * 2


async def test_redirect_loops_stop(http, server):
    result = await fetch(tool(http, allow_loopback=True, max_redirects=3), server.url("/loop"))
    assert result.is_error and "more than 3 redirects" in result.text
    assert len(server.requests) == 4


async def test_the_body_is_cut_at_the_size_cap(http, server):
    result = await fetch(tool(http, allow_loopback=True, max_chars=10_000_000), server.url("/big"))
    assert not result.is_error
    assert result.text.endswith("[page cut at 1,000,000 bytes]")
    assert result.text.split("\n\n")[1] == "a" * 1_000_000


async def test_the_text_is_cut_for_the_model(http, server):
    result = await fetch(tool(http, allow_loopback=True, max_bytes=5000, max_chars=100), server.url("/big"))
    assert result.text.endswith("[page cut at 5,000 bytes]\n\n[text cut at 100 characters]")


async def test_binary_content_and_http_errors_are_reported(http, server):
    fetcher = tool(http, allow_loopback=True)
    image = await fetch(fetcher, server.url("/image"))
    missing = await fetch(fetcher, server.url("/nothing"))
    assert image.is_error and "image/png, not a web page" in image.text
    assert missing.is_error and "HTTP 404" in missing.text


async def test_a_slow_site_times_out(http, server):
    result = await fetch(tool(http, allow_loopback=True, request_timeout_s=0.2), server.url("/slow"))
    assert result.is_error and "did not answer within 0.2 s" in result.text


async def test_a_closed_port_is_a_clear_error(http):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = await fetch(tool(http, allow_loopback=True), f"http://127.0.0.1:{port}/")
    assert result.is_error and "could not be reached (ConnectError)" in result.text


# --------------------------------------------------------------------------- HTML to text


def test_html_to_text_keeps_text_and_structure():
    title, text = html_to_text(
        "<html><head><title> A  title </title><meta charset=utf-8><script>x()</script>"
        "<body><h2>Steps</h2><ol><li>one</li><li>two &amp; three</li></ol>"
        "<table><tr><td>a</td><td>b</td></tr></table>line<br>break<svg><text>no</text></svg></body>"
    )
    assert title == "A title"
    assert text == "Steps\n\n- one\n- two & three\n\n| a | b\n\nline\nbreak"


async def test_https_goes_to_the_checked_address_with_the_name_for_sni_and_host():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, headers={"Content-Type": "text/plain"}, text="hello")

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        fetcher = tool(client, names={"secure.test": ["93.184.216.34"]})
        result = await fetch(fetcher, "https://secure.test/notes?week=2")
    assert result.text == "https://secure.test/notes?week=2\n\nhello"
    (request,) = seen
    assert str(request.url) == "https://93.184.216.34/notes?week=2"
    assert request.headers["host"] == "secure.test"
    assert request.extensions["sni_hostname"] == "secure.test"


async def test_a_public_page_redirecting_inward_is_refused_before_the_second_request():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(302, headers={"Location": "http://[fd00::7]/admin"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        result = await fetch(tool(client, names={"public.test": ["93.184.216.34"]}), "http://public.test/")
    assert result.is_error and "fd00::7 is a private address" in result.text
    assert [str(r.url) for r in seen] == ["http://93.184.216.34/"]


async def test_an_invalid_redirect_is_an_error():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(301, headers={"Location": "http://[::1/"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        result = await fetch(tool(client, names={"public.test": ["93.184.216.34"]}), "http://public.test/")
    assert result.is_error and "could not be reached (RemoteProtocolError)" in result.text  # httpx checks Location
