"""A fault-injecting HTTP proxy in front of Synapse, for the Matrix contract tests.

Synapse cannot be told "answer the next send with 429", so the gateway talks
to Synapse through this proxy, which forwards every request unchanged and can
be told to:

- answer the next room send with 429 ``M_LIMIT_EXCEEDED`` (with
  ``retry_after_ms``), 401 ``M_UNKNOWN_TOKEN``, 503, or 400 ``M_BAD_JSON``,
  without forwarding it;
- forward the next room send and then answer 504 -- the message is posted,
  the response is lost, exactly as when a load balancer times out;
- answer every send slowly, after forwarding it;
- answer a random share of sends with 429 or with 504-after-forwarding
  (``rate_429``, ``rate_lost``; seeded), for the crash test;
- go down (every request answered 502) and come back;
- hand out a /sync response it already handed out once more (a redelivery:
  the same events reach the gateway twice, as after a lost sync answer);
- add a raw event to the next /sync answer -- content Synapse's client API
  would refuse, as events federated from a laxer server can still carry;
- hold media downloads (a stuck media repository) or answer them with an
  HTTP error, and note the ``since`` of every /sync, so a test can tell that
  a sync's token was stored before its files were fetched.

Everything else -- what was posted, deduplication by txnId, media -- is the
real homeserver's doing.  The proxy runs in the test's event loop (uvicorn on
a free loopback port).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
from collections import Counter
from typing import Any

import httpx

from tests.waits import HANG_S

SEND_RE = re.compile(r"^/_matrix/client/(?:r0|v3)/rooms/[^/]+/send/")
SYNC_RE = re.compile(r"^/_matrix/client/(?:r0|v3)/sync$")
MEDIA_RE = re.compile(r"^/_matrix/(?:client/v1/media|media/v3)/download/")
KEPT_SYNCS = 50
HOP_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}
CANNED = {
    401: ("M_UNKNOWN_TOKEN", "proxy: access token not recognised"),
    403: ("M_FORBIDDEN", "proxy: forbidden"),
    400: ("M_BAD_JSON", "proxy: content not valid JSON"),
    503: ("M_UNKNOWN", "proxy: homeserver overloaded"),
    429: ("M_LIMIT_EXCEEDED", "proxy: too many requests"),
}


class MatrixFaultProxy:
    def __init__(self, upstream: str, *, seed: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.url = ""
        self.next_faults: list[tuple[int, float]] = []
        self.path_faults: list[tuple[re.Pattern[str], int]] = []
        self.down = False
        self.send_latency = 0.0
        self.rate_429 = 0.0
        self.rate_lost = 0.0
        self.rng = random.Random(seed)
        self.outcomes: Counter[str] = Counter()
        self.syncs: list[bytes] = []
        self.replay: bytes | None = None
        self.injected: list[tuple[str, dict]] = []
        self.media_hold = False
        self.media_status = 0
        self.downloads = 0
        self.sinces: list[str] = []
        self._http = httpx.AsyncClient(trust_env=False, timeout=httpx.Timeout(60.0))
        self._server: Any = None
        self._task: asyncio.Task | None = None

    # ------------------------------------------------------------------ control

    def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        self.next_faults.append((status, retry_after))

    def fail_next(self, path: str, status: int) -> None:
        """Answer the next request whose path matches the regex ``path`` with ``status``, once, before it reaches Synapse."""
        self.path_faults.append((re.compile(path), status))

    def redeliver(self, event_id: str) -> None:
        """Answer the next /sync with the latest earlier answer that carried ``event_id``."""
        needle = event_id.encode()
        for body in reversed(self.syncs):
            if needle in body:
                self.replay = body
                return
        raise AssertionError(f"no /sync answer carried {event_id}")

    def inject(self, room_id: str, event: dict) -> None:
        """Put ``event`` into ``room_id``'s timeline in the next /sync answer that carries that room or none."""
        self.injected.append((room_id, event))

    def _with_injected(self, body: bytes) -> bytes:
        answer = json.loads(body)
        for room_id, event in self.injected:
            rooms = answer.setdefault("rooms", {}).setdefault("join", {})
            timeline = rooms.setdefault(room_id, {}).setdefault("timeline", {"events": [], "limited": False})
            timeline.setdefault("events", []).append(event)
        self.injected.clear()
        return json.dumps(answer).encode()

    # ------------------------------------------------------------------ serving

    async def start(self) -> str:
        import uvicorn

        config = uvicorn.Config(self, host="127.0.0.1", port=0, log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=0.2)  # a held /sync long-poll need not be waited out
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, HANG_S)
        await self._http.aclose()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        status, headers, payload = await self._handle(scope, body)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    async def _handle(self, scope: dict, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        path = scope["path"]
        is_send = scope["method"] == "PUT" and bool(SEND_RE.match(path))
        if self.down:
            self.outcomes["down"] += 1
            return _error(502, "M_UNKNOWN", "proxy: homeserver unreachable")
        for index, (pattern, status) in enumerate(self.path_faults):
            if pattern.search(path):
                del self.path_faults[index]
                self.outcomes[f"path_failed_{status}"] += 1
                return _error(status, "M_UNKNOWN", f"proxy: injected {status}")
        if scope["method"] == "GET" and MEDIA_RE.match(path):
            while self.media_hold:
                await asyncio.sleep(0.05)
            if self.media_status:
                return _error(self.media_status, "M_UNKNOWN", f"proxy: injected {self.media_status}")
            self.downloads += 1
        if scope["method"] == "GET" and SYNC_RE.match(path):
            since = re.search(r"(?:^|&)since=([^&]+)", scope.get("query_string", b"").decode())
            if since:
                self.sinces.append(since.group(1))
            if self.replay is not None:
                body, self.replay = self.replay, None
                self.outcomes["sync_replayed"] += 1
                return 200, [(b"content-type", b"application/json")], body
            response = await self._forward(scope, body)
            content = response.content
            if response.status_code == 200:
                content = self._with_injected(content) if self.injected else content
                self.syncs = [*self.syncs[-KEPT_SYNCS + 1:], content]
            return response.status_code, _headers(response), content
        fault = self.next_faults.pop(0) if is_send and self.next_faults else None
        if is_send and fault is None and (self.rate_429 or self.rate_lost):
            roll = self.rng.random()
            if roll < self.rate_429:
                fault = (429, 0.2)
            elif roll < self.rate_429 + self.rate_lost:
                fault = (504, 0.0)
        if fault is not None and fault[0] != 504:
            status, retry_after = fault
            self.outcomes["rate_limited" if status == 429 else f"failed_{status}"] += 1
            errcode, error = CANNED.get(status, ("M_UNKNOWN", f"proxy: injected {status}"))
            extra = {"retry_after_ms": int(retry_after * 1000)} if status == 429 else {}
            return _error(status, errcode, error, **extra)
        response = await self._forward(scope, body)
        if is_send:
            self.outcomes["posted"] += 1
            if self.send_latency:
                await asyncio.sleep(self.send_latency)
        if fault is not None:  # 504: posted upstream, the answer is lost on the way back
            self.outcomes["lost_response"] += 1
            return _error(504, "M_UNKNOWN", "proxy: gateway timeout")
        return response.status_code, _headers(response), response.content

    async def _forward(self, scope: dict, body: bytes) -> httpx.Response:
        query = scope.get("query_string", b"").decode()
        url = f"{self.upstream}{scope['path']}" + (f"?{query}" if query else "")
        headers = [(k.decode(), v.decode()) for k, v in scope["headers"] if k.decode().lower() not in HOP_HEADERS]
        return await self._http.request(scope["method"], url, headers=headers, content=body, timeout=90)


def _headers(response: httpx.Response) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in response.headers.items() if k.lower() not in HOP_HEADERS]


def _error(status: int, errcode: str, error: str, **extra: Any) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    payload = json.dumps({"errcode": errcode, "error": error, **extra}).encode()
    return status, [(b"content-type", b"application/json")], payload
