"""``fetch_page`` never reaches an internal address, however it is spelled or redirected to.

Extends ``tests/brain/test_tools_fetch.py`` (the address policy, the plain
forms of loopback, private, link-local and metadata addresses, schemes,
user info and redirects to private names) with the spellings a URL parser and
``getaddrinfo`` read differently: decimal, octal and hex IPv4, short forms,
IPv4-mapped IPv6, the unspecified address, a trailing dot, names that resolve
to loopback, user-info and scheme-relative tricks -- asked for directly and as
redirects from a stub site.

The stub site listens on 127.0.0.3 and only 127.0.0.3/32 is allowed (the
exception an operator would add for an intranet host).  Canaries listen on
127.0.0.1 and ::1, the addresses the spellings point at; each test ends by
checking that no canary saw a request.  Numeric spellings go through the real
resolver (``getaddrinfo`` reads them without DNS, the same way production
does); test names resolve from a table, and any other name is unknown, so
nothing here asks DNS.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest

from brain.tools.base import ToolContext, ToolResult
from brain.tools.builtin.fetch import FetchPageTool, resolve_host
from gateway.core.config import PartnerConfig
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    Sender,
    Text,
    UserId,
)
from gateway.core.turns import Role, Turn
from tests.security.probes.listeners import CANARY_BODY, Listener, listening

STUB_HOST = "127.0.0.3"
NUMERIC = set("0123456789abcdefxABCDEFX.:")
NAMES = {
    "public.test": [STUB_HOST],
    "loopback.test": ["127.0.0.1"],
    "localhost.": ["127.0.0.1"],  # what resolvers that honour the trailing dot answer
    "v6.test": ["::1"],
    "sneaky.test": ["93.184.216.34", "127.0.0.1"],  # one public answer does not excuse an internal one
    "metadata.test": ["169.254.169.254"],
}


async def resolver(host: str, port: int) -> Sequence[str]:
    if host in NAMES:
        return NAMES[host]
    if set(host) <= NUMERIC or host == "localhost":
        return await resolve_host(host, port)  # numbers and /etc/hosts: no DNS query
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@dataclass
class Site:
    stub: Listener
    canary: Listener
    canary6: Listener
    tool: FetchPageTool


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    async with listening(STUB_HOST) as stub, listening("127.0.0.1") as canary, listening("::1") as canary6:
        async with httpx.AsyncClient(trust_env=False) as http:
            tool = FetchPageTool(http, resolver=resolver, allowed_networks=[ipaddress.ip_network(f"{STUB_HOST}/32")])
            yield Site(stub, canary, canary6, tool)
        assert canary.requests == [] and canary6.requests == [], "a request reached an internal address"


def spellings(site: Site) -> list[str]:
    """URLs that all mean a canary (or another internal address), each spelled differently."""
    p, p6 = site.canary.port, site.canary6.port
    return [
        f"http://127.0.0.1:{p}/", f"http://2130706433:{p}/", f"http://0x7f.1:{p}/", f"http://0x7f000001:{p}/",
        f"http://017700000001:{p}/", f"http://127.1:{p}/", f"http://0:{p}/", f"http://0.0.0.0:{p}/",
        f"http://localhost:{p}/", f"http://LOCALHOST:{p}/", f"http://localhost.:{p}/", f"http://loopback.test:{p}/",
        f"http://sneaky.test:{p}/", f"http://[::ffff:127.0.0.1]:{p}/", f"http://[::ffff:7f00:1]:{p}/",
        f"http://[0:0:0:0:0:ffff:127.0.0.1]:{p}/", f"http://[::1]:{p6}/", f"http://[::]:{p6}/",
        f"http://[0:0:0:0:0:0:0:1]:{p6}/", f"http://v6.test:{p6}/", f"HTTP://127.0.0.1:{p}/",
        f"http://evil@127.0.0.1:{p}/", f"http://public.test@127.0.0.1:{p}/", f"http://127.0.0.1:{p}#@public.test/",
        "http://169.254.169.254/latest/meta-data/", "http://metadata.test/latest/meta-data/",
        "http://[fe80::a9fe:a9fe]/", "http://[::ffff:169.254.169.254]/",
        "file:///etc/passwd", f"gopher://127.0.0.1:{p}/_GET", f"ftp://127.0.0.1:{p}/", f"dict://127.0.0.1:{p}/",
        f"ws://127.0.0.1:{p}/",
    ]


def context() -> ToolContext:
    address = Address(channel=ChannelName("webchat"), account=AccountId("default"),
                      conversation=Conversation(chat=ChatId("bob"), kind=ConversationKind.DIRECT))
    sender = Sender(user=UserId("bob"))
    message = InboundMessage(event_id=EventId("e1"), address=address, sender=sender, elements=(Text(text="read this"),),
                             received_at=datetime.now(UTC))
    turn = Turn(partner=PartnerConfig(id="tutor", name="Tutor"), address=address, sender=sender, role=Role.LEARNER,
                messages=[message])
    return ToolContext(partner="tutor", turn=turn, surface=frozenset({"fetch_page"}))


async def fetch(tool: FetchPageTool, url: str) -> ToolResult:
    return await tool.run(FetchPageTool.Arguments(url=url), context())


def refused(result: ToolResult) -> bool:
    """A clear tool error, and nothing of the canary page."""
    return result.is_error and result.text.startswith("Not fetched:") and CANARY_BODY.decode() not in result.text


async def test_the_allowed_stub_site_is_fetched(site: Site) -> None:
    """The positive control: the exception is real, so the refusals below are about the address, not the rig."""
    result = await fetch(site.tool, site.stub.url("/page").replace(STUB_HOST, "public.test"))
    assert not result.is_error and CANARY_BODY.decode() in result.text


async def test_every_spelling_of_an_internal_address_is_refused_before_connecting(site: Site) -> None:
    results = {url: await fetch(site.tool, url) for url in spellings(site)}
    assert [url for url, result in results.items() if not refused(result)] == []
    assert site.stub.requests == []


async def test_a_redirect_from_the_stub_site_to_any_spelling_is_refused_before_the_second_request(site: Site) -> None:
    targets = [*spellings(site), f"//127.0.0.1:{site.canary.port}/", f"//[::1]:{site.canary6.port}/"]
    for target in targets:
        start = site.stub.url("/redirect").replace(STUB_HOST, "public.test")
        result = await fetch(site.tool, str(httpx.URL(start, params={"to": target})))
        assert refused(result), (target, result.text)
    assert len(site.stub.requests) == len(targets)  # one hop each: the stub's redirect, then the refusal


async def test_the_refusal_says_why_in_words_the_model_can_relay(site: Site) -> None:
    p = site.canary.port
    reasons = {
        f"http://2130706433:{p}/": "2130706433 resolves to 127.0.0.1, a loopback address",
        f"http://0x7f.1:{p}/": "0x7f.1 resolves to 127.0.0.1, a loopback address",
        f"http://[::ffff:127.0.0.1]:{p}/": "a loopback address",
        f"http://0:{p}/": "an unspecified address",
        f"http://localhost.:{p}/": "localhost. resolves to 127.0.0.1, a loopback address",
        f"http://sneaky.test:{p}/": "sneaky.test resolves to 127.0.0.1, a loopback address",
        f"http://evil@127.0.0.1:{p}/": "URLs with a user name or password are not fetched",
        "http://[::ffff:169.254.169.254]/": "a link-local address",
        f"gopher://127.0.0.1:{p}/_GET": "only http and https URLs can be fetched, not gopher:",
    }
    for url, why in reasons.items():
        result = await fetch(site.tool, url)
        assert why in result.text, (url, result.text)
