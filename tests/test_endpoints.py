"""Endpoints in plain words: placeholder hosts left from examples, and why a connection failed."""

from __future__ import annotations

import socket

import httpx
import pytest

from gateway.endpoints import origin, placeholder_host, why_unreachable


@pytest.mark.parametrize("value, found", [
    ("https://YOUR.HS", "YOUR.HS"),
    ("https://matrix.example.org", "matrix.example.org"),
    ("imap.example.com", "imap.example.com"),
    ("https://your-homeserver.org", "your-homeserver.org"),
    ("https://<homeserver>/", "<homeserver>"),
    ("https://matrix.org", None),
    ("https://Matrix.Org", None),
    ("yourschool.org", None),
    ("smtp.gmail.com", None),
    ("127.0.0.1", None),
    ("http://[::1]:8008", None),
])
def test_placeholder_hosts_are_the_ones_copied_from_examples(value, found):
    assert placeholder_host(value) == found


def test_origin_keeps_scheme_host_and_port_and_drops_paths_that_may_hold_tokens():
    assert origin("https://api.telegram.org/bot123:SECRET/getMe") == "https://api.telegram.org"
    assert origin("http://127.0.0.1:8081/bot") == "http://127.0.0.1:8081"


async def test_a_refused_connection_is_found_under_the_sdks_own_words():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(httpx.ConnectError) as caught:  # "All connection attempts failed"
        async with httpx.AsyncClient(trust_env=False) as client:
            await client.get(f"http://127.0.0.1:{port}/")
    assert why_unreachable(caught.value) == "connection refused"


def test_an_error_that_is_no_connection_failure_is_not_one():
    assert why_unreachable(ValueError("bad json")) is None
