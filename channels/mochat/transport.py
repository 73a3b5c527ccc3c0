"""The wire to Mochat: the REST routes on httpx and the Socket.IO client, and the one place errors are translated.

**REST.**  Every call is a JSON ``POST`` under ``/api/claw/`` with the agent's
token in ``X-Claw-Token``; Mochat wraps an answer as ``{"code": 200, "data": {...}}``
and says a refusal either by the HTTP status or by that ``code``.  Both go through
the kit's table (``channels._kit.http_errors``)::

    401, or code 401            -> AuthFailed   (the claw token: a human must fix it)
    403 / code 403              -> Forbidden    (that session or panel only)
    404 / code 404              -> NotFound
    429 / code 429              -> RateLimited  (Retry-After honoured)
    5xx, a refused connection   -> PeerUnavailable / PeerUnreachable
    any other code              -> BadRequest

**Socket.** python-socketio's ``AsyncClient`` with the msgpack serializer, the
token in the connect ``auth``.  It is built with ``reconnection=False``: one
reconnect layer only, the channel's (channel.py), which polls while the socket
is down and tries it again on the kit's backoff.  python-socketio is imported by
:func:`new_socket` alone, so the module loads without the extra.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from channels._kit.http_errors import BodyCodes, ErrorKind, raise_for
from gateway.core.errors import PeerUnavailable, PeerUnreachable
from gateway.endpoints import origin, why_unreachable

PLATFORM = "mochat"
TOKEN_HEADER = "X-Claw-Token"
CODES = BodyCodes(code_field="code", success=frozenset({"200", "0"}), kinds={
    "401": ErrorKind.AUTH_FAILED, "403": ErrorKind.FORBIDDEN, "404": ErrorKind.NOT_FOUND,
    "429": ErrorKind.RATE_LIMITED, "500": ErrorKind.UNAVAILABLE, "503": ErrorKind.UNAVAILABLE,
})
TIMEOUT = httpx.Timeout(15.0, connect=5.0)


class MochatApi:
    """The agent's REST calls, on an ``httpx.AsyncClient`` it makes and closes."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url, self._token = base_url.rstrip("/"), token
        self._client = httpx.AsyncClient(timeout=TIMEOUT, trust_env=False)

    async def call(self, route: str, body: dict[str, Any], *, wait_s: float | None = None) -> dict[str, Any]:
        """``POST /api/claw/<route>``; the unwrapped ``data``, or the translated error raised."""
        url = f"{self.base_url}/api/claw/{route}"
        timeout = httpx.Timeout(wait_s + 10.0, connect=5.0) if wait_s is not None else TIMEOUT
        try:
            response = await self._client.post(url, content=json.dumps(body, ensure_ascii=False).encode(),
                                                headers={"Content-Type": "application/json", TOKEN_HEADER: self._token},
                                                timeout=timeout)
        except httpx.HTTPError as error:
            why = why_unreachable(error)
            if why is not None:
                raise PeerUnreachable(PLATFORM, origin(self.base_url), why, check="the network or base_url",
                                      action=route) from None
            raise PeerUnavailable(PLATFORM, f"{route}: {type(error).__name__}") from None
        parsed = raise_for(PLATFORM, route, response, codes=CODES)
        if isinstance(parsed, dict) and "code" in parsed:
            data = parsed.get("data")
            return data if isinstance(data, dict) else {}
        return parsed if isinstance(parsed, dict) else {}

    async def watch(self, session: str, cursor: int, *, timeout_s: float, limit: int) -> dict[str, Any]:
        """One long poll of a session from ``cursor``: ``{sessionId, cursor, events}``."""
        return await self.call("sessions/watch", {"sessionId": session, "cursor": cursor,
                                                  "timeoutMs": int(timeout_s * 1000), "limit": limit}, wait_s=timeout_s)

    async def panel_messages(self, panel: str, *, limit: int) -> list[Any]:
        """The panel's latest messages, oldest first."""
        data = await self.call("groups/panels/messages", {"panelId": panel, "limit": limit})
        messages = data.get("messages")
        return messages if isinstance(messages, list) else []

    async def send(self, *, session: str | None, panel: str | None, content: str, reply_to: str | None,
                   group: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"content": content}
        if reply_to:
            body["replyTo"] = reply_to
        if session is not None:
            return await self.call("sessions/send", {"sessionId": session, **body})
        if group:
            body["groupId"] = group
        return await self.call("groups/panels/send", {"panelId": panel, **body})

    async def close(self) -> None:
        await self._client.aclose()


def new_socket() -> Any:
    """A Socket.IO client speaking msgpack that never reconnects by itself (see the module docstring)."""
    import socketio

    return socketio.AsyncClient(reconnection=False, serializer="msgpack", logger=False, engineio_logger=False)
