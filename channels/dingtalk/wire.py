"""DingTalk's Stream mode in the kit's websocket words (:class:`channels._kit.websocket.WireProtocol`).

The URL carries a one-time ticket, so there is no identify and no ready frame:
the open socket is the session (``opens_ready``).  DingTalk pings with SYSTEM
``ping`` frames, each acked with its data echoed; the client keeps the line
checked with websocket pings (``heartbeat`` is None).  A SYSTEM ``disconnect``
asks for a new connection (a new ticket).  Every CALLBACK and EVENT is acked
with ``code 200`` after the kit made its messages durable; a robot message
DingTalk pushes again (an ack it missed) lands on the same ``msgId`` and is
answered once.  A frame with an envelope but unreadable content is recorded as
invalid and still acked, so DingTalk stops pushing it; one without an envelope
has no ``messageId`` to ack and is only recorded.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from channels._kit.websocket import NO_AUTH_CLOSES, NO_CLOSE_CODES, Frame, FrameKind, Resume, Wire
from channels.dingtalk.decode import BOT_TOPIC, Envelope, Skipped, decode, envelope, payload
from gateway.core.errors import InvalidEvent
from gateway.core.messages import AccountId

OK = 200


def ack(frame: Envelope, data: str) -> str:
    """The ack of one frame, as the Stream protocol documents it."""
    return json.dumps({"code": OK, "headers": {"contentType": "application/json", "messageId": frame.headers.message_id},
                       "message": "OK", "data": data})


class StreamProtocol:
    """One account's words; ``refused`` records a message type the gateway does not read."""

    greets = False
    opens_ready = True
    auth_failed_close_codes = NO_AUTH_CLOSES  # refused credentials fail the ticket call, before any socket
    identify_again_close_codes = NO_CLOSE_CODES

    def __init__(self, account: AccountId, endpoint: Callable[[], Awaitable[str]], *, heartbeat_interval: float,
                 refused: Callable[[str, str], None]) -> None:
        self.account, self._endpoint, self._refused = account, endpoint, refused
        self.heartbeat_interval = heartbeat_interval

    async def endpoint(self, resume: Resume | None) -> str:
        return await self._endpoint()  # a new ticket for every connection; nothing to resume

    def identify(self, resume: Resume | None) -> Wire | None:
        return None

    def heartbeat(self, sequence: int | None) -> Wire | None:
        return None

    def read(self, wire: Wire) -> Frame:
        frame = envelope(wire)
        if frame.type == "SYSTEM":
            if frame.headers.topic == "disconnect":
                return Frame(FrameKind.RECONNECT)
            return Frame(FrameKind.EVENT, ack=ack(frame, json.dumps(payload(frame.data))))
        done = ack(frame, json.dumps({"response": None}))
        if frame.type != "CALLBACK" or frame.headers.topic != BOT_TOPIC:
            return Frame(FrameKind.EVENT, ack=done)  # not subscribed by us: acked and passed over
        try:
            message = decode(frame.data, account=self.account)
        except Skipped as skipped:
            self._refused("dingtalk-msgtype", f"{frame.headers.message_id[:64]}: {skipped}")
            return Frame(FrameKind.EVENT, ack=done)
        except InvalidEvent as error:
            return Frame(FrameKind.EVENT, ack=done, invalid=str(error))
        return Frame(FrameKind.EVENT, messages=(message,), ack=done)
