"""What the end-to-end tests (and ``bench/brain.py``) stand on: a gateway config, a served web chat, a learner.

Nothing here is faked: the gateway builds its real brain (``Gateway._build_brain``)
and reaches the model through litellm over HTTP to the stub in
``tests/peers/model_stub.py``; the learner speaks only through the channel's
own peer -- the web chat's HTTP API here, the relay platform for the relay
channel.

:class:`WebLearner` plays the web chat page without a browser: it POSTs to
``/api/messages`` and follows ``/api/events``, keeping *every* version of every
message it is shown, with the time it arrived -- so a test can check that no
preview ever showed think tags or tool markup, and a benchmark can time the
first visible text.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import json
import re
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from channels.webchat.identity import COOKIE
from gateway.app import Gateway
from tests.waits import HANG_S, HTTP_S

STUB_KEY_ENV = "STUB_KEY"
"""The stub checks no key; naming one as ``env:STUB_KEY`` still runs the config's secret handling."""
PARTNER = "buddy"

_ids = itertools.count(1)


def e2e_config(data_dir: Path, api_base: str, *, channel: str = "webchat", account: str = "default",
               account_settings: dict[str, Any] | None = None, mid_turn: str = "queue") -> dict[str, Any]:
    """A raw config: partner ``buddy`` (persona study-buddy, model on the stub) bound to one channel account.

    Raw (a dict) so a subprocess test can write it as YAML and an in-process one parse it.
    """
    return {
        "data_dir": str(data_dir),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{
            "id": PARTNER, "name": "Study Buddy", "persona": "study-buddy", "mid_turn": mid_turn,
            "model": {"model": "openai/stub-model", "api_base": api_base, "api_key": f"env:{STUB_KEY_ENV}", "timeout_s": 60},
        }],
        "bindings": [{"partner": PARTNER, "channel": channel, "account": account}],
        "channels": {channel: {account: {"access": {"dm": "open"}, **(account_settings or {})}}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
    }


@contextlib.asynccontextmanager
async def served(gateway: Gateway) -> AsyncIterator[str]:
    """The gateway's HTTP app (web chat included) on a free loopback port; yields its base URL."""
    from gateway.http.app import build_app
    from gateway.http.server import serve_http

    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(serve_http(build_app(gateway), "127.0.0.1", 0, on_ready=ready.set_result, shutdown_timeout=1))
    try:
        yield await asyncio.wait_for(ready, HANG_S)
    finally:
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server


async def accepting(url: str, *, timeout: float = HANG_S) -> None:
    """Wait until a peer process answers HTTP at ``url`` (any status will do).

    The peer processes in ``tests/peers`` print their address once the socket is bound but before
    uvicorn listens on it, so a connection made at once may be refused; this waits that out."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(trust_env=False) as http:
        while True:
            try:
                await http.get(url, timeout=2)
                return
            except httpx.TransportError:  # refused, or too slow to answer this once: try again until the deadline
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.02)


def visible_text(markup: str) -> str:
    """What a reader sees of the page's HTML: tags removed, entities decoded, whitespace trimmed."""
    return html.unescape(re.sub(r"<[^>]+>", "", markup)).strip()


@dataclass(frozen=True)
class Shown:
    """One ``message`` event the page received: a new bubble, or a new version of one."""

    at: float
    """``time.perf_counter()`` when the event was read off the stream."""
    id: str
    html: str
    final: bool

    @property
    def text(self) -> str:
        return visible_text(self.html)


class WebLearner:
    """One browser session on the web chat: says things, and sees every version of every bubble."""

    def __init__(self, base_url: str, *, account: str = "default", session: str | None = None,
                 local_address: str | None = None) -> None:
        """``local_address``: the loopback address to connect from (127.0.0.2 is another client to the gateway)."""
        self.session = session or secrets.token_urlsafe(32)
        """The credential in the page's cookie (the gateway never sees it past its HTTP edge)."""
        self.learner = ""
        """The learner id the gateway derives from the session: the chat and sender it sees (set by ``open``)."""
        self.http = httpx.AsyncClient(base_url=f"{base_url}/channels/webchat/{account}", timeout=HTTP_S, trust_env=False,
                                      cookies={COOKIE: self.session},
                                      transport=httpx.AsyncHTTPTransport(local_address=local_address) if local_address else None)
        self.shown: list[Shown] = []
        self.said: list[str] = []
        """The message ids this learner posted (the gateway's event ids), in order."""
        self.typing: list[float] = []
        """``time.perf_counter()`` of every typing indicator the page was sent."""
        self._changed = asyncio.Event()
        self._follower: asyncio.Task[None] | None = None

    async def open(self) -> WebLearner:
        answer = await self.http.post("/api/session", json={})
        assert answer.status_code == 200, answer.text
        self.learner = answer.json()["learner"]
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._follower = asyncio.create_task(self._follow(opened))
        await asyncio.wait_for(opened, HANG_S)
        return self

    async def _follow(self, opened: asyncio.Future[None]) -> None:
        async with self.http.stream("GET", "/api/events", timeout=None) as response:
            response.raise_for_status()
            event, data = "", ""
            async for line in response.aiter_lines():
                if not opened.done():
                    opened.set_result(None)  # the ``retry:`` preamble: the stream is open
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data += line[5:].strip()
                elif not line:
                    if event == "message" and data:
                        payload = json.loads(data)
                        self.shown.append(Shown(time.perf_counter(), payload["id"], payload["html"], payload["final"]))
                        self._changed.set()
                    elif event == "typing":
                        self.typing.append(time.perf_counter())
                    event, data = "", ""

    async def say(self, text: str) -> str:
        """Post one message as the page does; once the gateway has it durably (202), returns the gateway's
        event id for it (``<learner id>.<message id>``: the page's id, scoped to its session)."""
        message_id = f"m{next(_ids)}"
        response = await self.http.post("/api/messages", json={"message_id": message_id, "text": text})
        assert response.status_code == 202, response.text
        event_id = f"{self.learner}.{message_id}"
        self.said.append(event_id)
        return event_id

    def bubbles(self) -> dict[str, list[Shown]]:
        """Message id -> every version shown, oldest first (insertion order = order of first appearance)."""
        found: dict[str, list[Shown]] = {}
        for shown in self.shown:
            found.setdefault(shown.id, []).append(shown)
        return found

    def finished(self) -> list[Shown]:
        """The last version of each bubble that has reached its final form."""
        return [versions[-1] for versions in self.bubbles().values() if versions[-1].final]

    async def wait_for(self, check: Any, *, timeout: float = HANG_S, what: str = "the page to show it") -> Any:
        """Wait until ``check(self)`` is truthy, re-checking whenever the page receives something."""
        deadline = time.monotonic() + timeout
        while not (result := check(self)):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; page shows {self.shown!r}")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
        return result

    async def close(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await self._follower
        await self.http.aclose()
