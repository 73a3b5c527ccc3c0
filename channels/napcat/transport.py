"""OneBot actions on the socket: ``{"action", "params", "echo"}`` out, the answer with the same ``echo`` back.

The socket is the kit's :class:`~channels._kit.websocket.Session` in forward
mode, or the websocket NapCat opened to the gateway in reverse mode; either way
:class:`Actions` is handed a ``send`` for the socket of the moment and
:meth:`Actions.answered` the answers read from it.  Echoes are fresh per call
(a counter under a per-process prefix), so an answer from a connection before a
reconnect can never complete a call of the next one.

A failed answer is translated once, here, by OneBot v11's retcodes: 1400 bad
request, 1401 / 1403 the access token, 1404 an action NapCat does not have.
Other failures are NapCat's own (retcode 200 and the like, with ``wording``):
permanent, because a retry of a send that NapCat may have half done could show
the learner the answer twice.  No answer within ``action_timeout_s`` is a lost
connection (transient).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from channels.napcat.decode import Answer
from gateway.core.errors import AuthFailed, BadRequest, GatewayError, PeerUnavailable, Unsupported

log = logging.getLogger(__name__)
PLATFORM = "napcat"
Send = Callable[[str], Awaitable[None]]


def translate(action: str, answer: Answer) -> GatewayError:
    said = (answer.wording or answer.message or answer.status)[:200]
    code = answer.retcode
    if code in (1401, 1403):
        return AuthFailed(PLATFORM, f"{action}: the access token was refused", code=code)
    if code == 1404:
        return Unsupported(PLATFORM, f"{action}: this NapCat has no such action", code=code)
    return BadRequest(PLATFORM, f"{action}: {said}", code=code)


class Actions:
    """Echo-correlated OneBot actions over whichever socket is open now."""

    def __init__(self, *, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._send: Send | None = None
        self._prefix = secrets.token_hex(4)
        self._ids = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[Answer]] = {}

    def attach(self, send: Send | None) -> None:
        """The socket's send, or None when it closed: calls in flight fail now rather than at their timeout."""
        self._send = send
        if send is None:
            for future in self._waiting.values():
                if not future.done():
                    future.set_exception(PeerUnavailable(PLATFORM, "the websocket closed before the answer"))

    def answered(self, answer: Answer) -> None:
        future = self._waiting.get(str(answer.echo))
        if future is None or future.done():
            log.debug("napcat answer without a caller echo=%s", str(answer.echo)[:40])
            return
        future.set_result(answer)

    async def call(self, action: str, params: dict[str, Any]) -> Any:
        """The action's ``data``; a failed retcode raised as the gateway's error."""
        send = self._send
        if send is None:
            raise PeerUnavailable(PLATFORM, "NapCat is not connected")
        echo = f"{self._prefix}-{next(self._ids)}"
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        self._waiting[echo] = future
        try:
            await send(json.dumps({"action": action, "params": params, "echo": echo}, ensure_ascii=False))
            answer = await asyncio.wait_for(future, self.timeout_s)
        except TimeoutError:
            raise PeerUnavailable(PLATFORM, f"{action}: no answer within {self.timeout_s:g} s") from None
        finally:
            self._waiting.pop(echo, None)
        if answer.status not in ("ok", "async") or answer.retcode not in (0, 1):
            raise translate(action, answer)
        return answer.data
