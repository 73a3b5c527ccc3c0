"""Contract harness for the built-in web chat.

The web chat's platform is the gateway's own HTTP app, so the peer is a plain
HTTP client playing the page: it POSTs ``/channels/webchat/default/api/messages``
and follows ``/api/events`` (Server-Sent Events) per session, keeping the
latest version of every message id as the page would show it.  Each session is
its own HTTP client (its own cookie jar), and is named by the learner id the
gateway derived from it -- the chat id the gateway and the suite see.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from pathlib import Path
from typing import Any

import httpx

from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.contract.harness import Said, Seen
from tests.waits import HANG_S, HTTP_S

_ids = itertools.count(1)


class WebchatHarness:
    channel = "webchat"
    account = "default"
    features: frozenset[str] = frozenset()

    @classmethod
    def create(cls, request: Any) -> WebchatHarness:
        return cls()

    def __init__(self) -> None:
        self.url = ""
        self.http: httpx.AsyncClient | None = None
        self._server: asyncio.Task | None = None
        self._sessions: dict[str, httpx.AsyncClient] = {}
        """learner id -> the client holding that session's cookie."""
        self._streams: dict[str, asyncio.Task] = {}
        self._shown: dict[str, dict[str, dict]] = {}
        """session -> message id -> latest event data (insertion order = order first shown)."""

    async def start(self, workdir: Path) -> None:
        pass

    def gateway_config(self, data_dir: Path) -> Config:
        return parse_config({
            "data_dir": str(data_dir),
            "http": {"port": 0},
            "partners": [{"id": "tutor", "name": "Tutor"}],
            "bindings": [{"partner": "tutor", "channel": self.channel, "account": self.account}],
            "channels": {self.channel: {self.account: {"access": {"dm": "open"}}}},
            "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 2},
        })

    async def attach(self, gateway: Any) -> None:
        from gateway.http.app import build_app
        from gateway.http.server import serve_http

        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._server = asyncio.create_task(
            serve_http(build_app(gateway), "127.0.0.1", 0, on_ready=lambda url: ready.set_result(url), shutdown_timeout=1)
        )
        self.url = await asyncio.wait_for(ready, HANG_S)
        self.http = self._client()

    def _client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=f"{self.url}/channels/{self.channel}/{self.account}", timeout=HTTP_S, trust_env=False)

    async def _new_session(self) -> str:
        client = self._client()
        answer = await client.post("/api/session", json={})
        assert answer.status_code == 200 and answer.json()["new"], answer.text
        learner = answer.json()["learner"]
        self._sessions[learner] = client
        return learner

    async def _follow(self, session: str, opened: asyncio.Future[None]) -> None:
        shown = self._shown.setdefault(session, {})
        async with self._sessions[session].stream("GET", "/api/events", timeout=None) as response:
            response.raise_for_status()
            event, data = "", ""
            async for line in response.aiter_lines():
                if not opened.done():
                    opened.set_result(None)
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data += line[5:].strip()
                elif not line:
                    if event == "message" and data:
                        payload = json.loads(data)
                        shown[payload["id"]] = payload
                    event, data = "", ""

    async def _open(self, session: str) -> None:
        if session in self._streams:
            return
        opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._streams[session] = asyncio.create_task(self._follow(session, opened))
        await asyncio.wait_for(opened, HANG_S)

    async def _post(self, session: str, message_id: str, text: str) -> None:
        response = await self._sessions[session].post("/api/messages", json={"message_id": message_id, "text": text})
        assert response.status_code == 202, response.text

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said:
        assert not group, "web chat has no groups"
        session = chat or await self._new_session()
        await self._open(session)
        message_id = f"m{next(_ids)}"
        await self._post(session, message_id, text)
        return Said(chat=session, user=session, text=text, ref=message_id)

    async def say_again(self, said: Said) -> None:
        await self._post(said.chat, said.ref, said.text)

    async def say_as_bot(self, text: str, *, chat: str) -> Said:
        raise AssertionError("web chat has no messages from the bot's own account")

    async def seen(self, chat: str) -> list[Seen]:
        return [
            Seen(id=data["id"], text=data["html"], attachments=tuple(a["url"] for a in data.get("attachments", ())))
            for data in self._shown.get(chat, {}).values()
        ]

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        raise AssertionError("web chat's platform is the gateway itself: it has no send errors to inject")

    async def rate_limited_sends(self) -> int:
        raise AssertionError("web chat has no rate limits")

    async def send_requests(self) -> int:
        raise AssertionError("web chat's platform is the gateway itself: there are no send requests to count")

    async def outage(self, down: bool) -> None:
        raise AssertionError("web chat's platform is the gateway itself: it cannot go down alone")

    async def slow_sends(self, seconds: float) -> None:
        raise AssertionError("web chat sends are in-process publishes; they cannot be slowed")

    async def stop(self) -> None:
        for task in [*self._streams.values(), self._server]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        for client in [*self._sessions.values(), self.http]:
            if client is not None:
                await client.aclose()
