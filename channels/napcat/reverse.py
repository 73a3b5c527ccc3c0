"""Reverse websocket: NapCat's websocket client connects to the gateway at ``/channels/napcat/<account>/ws``.

The handshake is checked before it is accepted: ``Authorization: Bearer
<access_token>`` (or ``?access_token=`` for clients that cannot set headers),
compared in constant time, and ``X-Self-ID`` -- the QQ number NapCat is logged
in as -- which must be there and, when the account names a ``self_id``, match
it.  A refusal is an HTTP 401 (403 for the wrong QQ account) with no socket.

One NapCat per account: a second connection replaces the first (NapCat
reconnects after a network blip before the old socket has timed out).  The
socket then carries events in and actions out (``X-Client-Role: Universal``),
read by the same decode as the forward mode.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable

from starlette.responses import PlainTextResponse
from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

log = logging.getLogger(__name__)
PATH = "/ws"

Serve = Callable[[WebSocket, str], Awaitable[None]]


def bearer(websocket: WebSocket) -> str:
    header = websocket.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() in ("bearer", "token") and token:
        return token.strip()
    return websocket.query_params.get("access_token", "")


def refusal(websocket: WebSocket, *, token: str, self_id: str | None) -> tuple[int, str] | None:
    """Why this handshake is refused (status, reason), or None to accept it."""
    given = bearer(websocket)
    if not given or not hmac.compare_digest(given.encode(), token.encode()):
        return 401, "missing or wrong access token"
    said = websocket.headers.get("x-self-id", "")
    if not said.isdigit():
        return 401, "no X-Self-ID header"
    if self_id and said != self_id:
        return 403, f"logged in as QQ {said}, not the account's self_id"
    return None


def reverse_routes(token: Callable[[], str], self_id: str | None, serve: Serve, account: str) -> list[BaseRoute]:
    async def endpoint(websocket: WebSocket) -> None:
        refused = refusal(websocket, token=token(), self_id=self_id)
        if refused is not None:
            status, reason = refused
            log.warning("napcat reverse websocket refused account=%s reason=%s", account, reason)
            await websocket.send_denial_response(PlainTextResponse(reason, status_code=status))
            return
        await websocket.accept()
        try:
            await serve(websocket, websocket.headers["x-self-id"])
        except WebSocketDisconnect:
            pass

    return [WebSocketRoute(PATH, endpoint)]
