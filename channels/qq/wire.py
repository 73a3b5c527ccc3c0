"""QQ's websocket gateway in the kit session's words (``mode: websocket``; ADR 0044, amended).

The dance is the kit's (channels/_kit/websocket.py), QQ's words for it (Q2)::

    server  op 10 hello {heartbeat_interval: ms}
    client  op 2 identify {token: "QQBot <access_token>", intents, shard: [0, 1]}
            or op 6 resume {token, session_id, seq: the last durable s}
    server  op 0 READY {session_id}  /  the missed dispatches, then op 0 RESUMED
    server  op 0 dispatch {t, d, s}  -- the same events the webhook posts, read by the same decode
    client  op 1 heartbeat {d: the last durable s}; server op 11 ack
    server  op 7 reconnect (resume) / op 9 invalid session (identify afresh)

QQ takes no ack per event: the sequence is the ack.  The kit stores ``s`` only
once the event is durable, and resumes and heartbeats name only a stored
``s``, so an event lost in a crash is delivered again on resume and one
delivered twice lands on its dedup key.  The URL comes from ``GET
/gateway/bot`` (transport.py) on every connection, with the token identify
names.  A close QQ uses to refuse the bot itself -- the token, the intents,
a bot taken down or banned -- is :class:`~gateway.errors.AuthFailed` through
the kit's ``auth_failed_close_codes``, with what to do; one after which QQ
resumes nothing (4006, 4007, its internal 49xx) makes the next connection
identify afresh (``identify_again_close_codes``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict, ValidationError

from channels._kit.websocket import Frame, FrameKind, Resume, Wire
from channels.qq.transport import QQApi
from channels.qq.webhook import DISPATCH, Payload
from gateway.core.errors import InvalidEvent
from gateway.core.messages import InboundMessage

HEARTBEAT, IDENTIFY, RESUME, RECONNECT, INVALID_SESSION, HELLO, HEARTBEAT_ACK = 1, 2, 6, 7, 9, 10, 11
INTENTS = 1 << 25 | 1 << 30
"""GROUP_AND_C2C_EVENT (direct chats, group @-messages) and PUBLIC_GUILD_MESSAGES (guild @-messages)."""
REFUSED: Mapping[int, str] = MappingProxyType({
    4004: "QQ refuses the access token: copy AppID and AppSecret again from q.qq.com, Development settings",
    4013: "QQ refuses the events asked for (invalid intent)",
    4014: "the bot may not receive these events: switch on direct chats and groups (单聊 / 群聊) on q.qq.com",
    4914: "the bot is unpublished (下架): only the sandbox may connect; set sandbox: true or publish the bot again",
    4915: "QQ has banned the bot (封禁): ask QQ to lift the ban, then restart the account",
})
"""Close codes after which reconnecting is refused the same way (QQ's websocket error codes)."""
IDENTIFY_AGAIN = frozenset({4006, 4007, *range(4900, 4914)})
"""Invalid session id, seq error, QQ's internal errors: QQ resumes none of them, a fresh identify is asked for."""


class Hello(BaseModel):
    model_config = ConfigDict(extra="ignore")
    heartbeat_interval: float


class Ready(BaseModel):
    model_config = ConfigDict(extra="ignore")
    session_id: str


class QQWire:
    """One bot's words; ``messages`` is the channel's one decode of a dispatch (the webhook's too)."""

    greets = True
    heartbeat_interval = 45.0
    opens_ready = False
    auth_failed_close_codes = REFUSED
    identify_again_close_codes = IDENTIFY_AGAIN

    def __init__(self, api: QQApi, messages: Callable[[Payload], Sequence[InboundMessage]]) -> None:
        self.api, self.messages = api, messages
        self._token = ""

    async def endpoint(self, resume: Resume | None) -> str:
        url, self._token = await self.api.gateway()
        return url

    def identify(self, resume: Resume | None) -> Wire | None:
        token = f"QQBot {self._token}"
        if resume is not None:
            return json.dumps({"op": RESUME, "d": {"token": token, "session_id": resume.session_id,
                                                   "seq": resume.sequence or 0}})
        return json.dumps({"op": IDENTIFY, "d": {"token": token, "intents": INTENTS, "shard": [0, 1],
                                                 "properties": {}}})

    def heartbeat(self, sequence: int | None) -> Wire | None:
        return json.dumps({"op": HEARTBEAT, "d": sequence})

    def read(self, wire: Wire) -> Frame:
        try:
            payload = Payload.model_validate_json(wire)
            if payload.op == HELLO:
                return Frame(FrameKind.HELLO, heartbeat_interval=Hello.model_validate(payload.d).heartbeat_interval / 1000)
            if payload.op == DISPATCH and payload.t == "READY":
                return Frame(FrameKind.READY, session_id=Ready.model_validate(payload.d).session_id)
        except ValidationError as error:
            raise InvalidEvent(f"qq gateway: not a QQ payload ({error.error_count()} problems)") from None
        kinds = {HEARTBEAT_ACK: FrameKind.HEARTBEAT_ACK, HEARTBEAT: FrameKind.HEARTBEAT_REQUEST,
                 RECONNECT: FrameKind.RECONNECT, INVALID_SESSION: FrameKind.INVALID_SESSION}
        if payload.op in kinds:
            return Frame(kinds[payload.op])
        if payload.op != DISPATCH:
            return Frame(FrameKind.IGNORED)
        if payload.t == "RESUMED":
            return Frame(FrameKind.RESUMED)
        try:
            return Frame(FrameKind.EVENT, sequence=payload.s, messages=self.messages(payload))
        except InvalidEvent as error:  # recorded by the session, and its s still counts: QQ sends it no more
            return Frame(FrameKind.EVENT, sequence=payload.s, invalid=str(error))
