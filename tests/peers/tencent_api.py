"""What the WeChat Official Account and WeCom self-built app emulators share: Tencent's ``cgi-bin`` and its callbacks.

Both platforms (X1-X3, W2, W4) hand out an ``access_token`` for an id and a
secret and refuse a call that carries a stale one with an ``errcode`` inside a
200; both post a callback as XML to the account's URL and try the same
``MsgId`` again, three retries in all, ``retry_after_s`` (5 s, shortened by
tests) after the attempt before began -- whether it timed out, found nobody
listening or got an answer that does not count.  :class:`TencentPeer` is that
much, written once:

- **Tokens.**  :meth:`TencentPeer.issue_token` hands one out;
  :meth:`TencentPeer.refusal` is the check every API call starts with: a token
  :meth:`~TencentPeer.expire_token` ended gets :attr:`~TencentPeer.EXPIRED`, one
  never issued :attr:`~TencentPeer.NOT_A_TOKEN`, then the next injected fault.
- **Faults.**  ``fail_next(code)`` makes the next call fail with that errcode;
  every errcode answered is in ``refused``.
- **Callbacks.**  :meth:`TencentPeer.deliver` posts one message and its
  retries, recording each attempt in ``deliveries``; the platform says which
  answers count (:meth:`TencentPeer.accepted`).

Each platform's emulator keeps its own routes, signing and encryption.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import ClassVar

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse

from gateway.http.server import serve_http
from tests.waits import HANG_S, HTTP_S

RETRIES = 3
TOKEN_LIFE_S = 7200
TLS = ssl.create_default_context()
"""Shared by every client the emulator opens.  Callbacks go to a loopback ``http://`` URL and never speak TLS,
but an httpx client builds a context of its own unless handed one -- ~20 ms of CPU, for every callback posted."""


@dataclass
class Delivery:
    """One POST of a callback and what the gateway answered."""

    msg_id: str
    attempt: int
    status: int
    body: str
    failed: str = ""
    """When ``status`` is 0 (no answer), how the attempt failed: ``ReadTimeout``, ``ConnectError`` (nobody listening)."""


def encoding_aes_key() -> str:
    """A fresh 43-character EncodingAESKey, as the admin console generates one."""
    return secrets.token_urlsafe(48).replace("-", "a").replace("_", "b")[:43]


@dataclass
class TencentPeer:
    """One account at an emulated Tencent platform: its tokens, its faults, what it took, its callbacks."""

    EXPIRED: ClassVar[tuple[int, str]] = (42001, "access_token expired")
    """The answer to a token :meth:`expire_token` ended."""
    NOT_A_TOKEN: ClassVar[tuple[int, str]] = (40014, "invalid access_token")
    """The answer to a token never handed out."""

    callback_url: str = ""
    retry_after_s: float = 5.0
    sent: list[dict] = field(default_factory=list)
    """Every message the platform took, as posted (:meth:`took` records one)."""
    sent_at: list[float] = field(default_factory=list)
    """When each of ``sent`` was taken, by this emulator's wall clock (what bench/channels.py times)."""
    refused: list[int] = field(default_factory=list)
    """Every errcode an API call was answered with."""
    send_calls: int = 0
    """Send requests received, whatever they were answered (a retry counts again): a subclass's send route counts."""
    deliveries: list[Delivery] = field(default_factory=list)
    tokens_issued: int = 0
    _good_tokens: set[str] = field(default_factory=set)
    _expired: set[str] = field(default_factory=set)
    _faults: list[int] = field(default_factory=list)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(int(time.time()) * 1000))

    def app(self) -> Starlette:
        raise NotImplementedError

    # ------------------------------------------------------------------ tokens and faults

    def expire_token(self) -> None:
        """Ends every token handed out: the next call that carries one is answered :attr:`EXPIRED`."""
        self._expired |= self._good_tokens
        self._good_tokens.clear()

    def fail_next(self, errcode: int) -> None:
        self._faults.append(errcode)

    def issue_token(self) -> str:
        token = "T" + secrets.token_hex(12)
        self._good_tokens.add(token)
        self.tokens_issued += 1
        return token

    def error(self, code: int, message: str) -> JSONResponse:
        self.refused.append(code)
        return JSONResponse({"errcode": code, "errmsg": message})

    def refusal(self, request: Request) -> JSONResponse | None:
        """The answer to an API call whose token is not good, or that a fault was injected for; else ``None``."""
        token = request.query_params.get("access_token")
        if token in self._expired:
            return self.error(*self.EXPIRED)
        if token not in self._good_tokens:
            return self.error(*self.NOT_A_TOKEN)
        if self._faults:
            code = self._faults.pop(0)
            return self.error(code, f"injected {code}")
        return None

    def took(self, message: dict) -> None:
        """Record a message the platform took, and when."""
        self.sent.append(message)
        self.sent_at.append(time.time())

    def texts_to(self, to: str) -> list[str]:
        """What ``to`` was shown, in arrival order (WeChat's passive replies too: they are recorded in ``sent``)."""
        return [m["text"]["content"] for m in self.sent if m["touser"] == to]

    # ------------------------------------------------------------------ callbacks

    def next_msg_id(self) -> str:
        return str(next(self._ids))

    def accepted(self, to: str, status: int, body: str) -> bool:
        """Whether the platform takes this answer to a callback as received (it tries again if not)."""
        raise NotImplementedError

    async def post(self, query: dict, body: bytes) -> httpx.Response:
        async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False, verify=TLS) as http:
            return await http.post(self.callback_url, params=query, content=body, headers={"Content-Type": "text/xml"})

    async def deliver(self, to: str, msg_id: str, envelope, *, attempts: int = 1) -> None:
        """Posts ``envelope()`` (a fresh query and body for each attempt) and retries it as the platform does.

        ``attempts`` above one posts again after an accepted answer, as when that answer was lost on the way."""
        answered = 0
        for attempt in range(1 + RETRIES):
            query, body = envelope()
            began = time.monotonic()
            try:
                async with httpx.AsyncClient(timeout=self.retry_after_s, trust_env=False, verify=TLS) as http:
                    answer = await http.post(self.callback_url, params=query, content=body)
                status, said, failed = answer.status_code, answer.text, ""
            except httpx.TransportError as error:  # no answer in time, or nobody listening: tried again
                status, said, failed = 0, "", type(error).__name__
            self.deliveries.append(Delivery(msg_id, attempt, status, said, failed))
            if self.accepted(to, status, said):
                answered += 1
                if answered >= attempts:
                    return
                continue
            await asyncio.sleep(max(0.0, self.retry_after_s - (time.monotonic() - began)))

    async def get_callback(self, params: dict, echostr: str) -> httpx.Response:
        """The URL check the admin console sends; the expected ``echostr`` rides in the answer's extensions."""
        async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False, verify=TLS) as http:
            answer = await http.get(self.callback_url, params=params)
        answer.extensions["echostr"] = echostr
        return answer


@contextlib.asynccontextmanager
async def serving(peer: TencentPeer) -> AsyncIterator[str]:
    """The peer's API on a free loopback port; yields its base URL (ending in ``/``)."""
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(serve_http(peer.app(), "127.0.0.1", 0, on_ready=ready.set_result, shutdown_timeout=1))
    try:
        yield (await asyncio.wait_for(ready, HANG_S)).rstrip("/") + "/"
    finally:
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server
