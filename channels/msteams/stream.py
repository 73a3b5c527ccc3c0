"""Teams' streaming protocol for 1:1 chats (TM5): one bubble that grows, then a final message.

A stream is a run of ``typing`` activities posted into the conversation,
each with a ``streaminfo`` entity, then one ``message`` that ends it::

    typing  {streamType: informative, streamSequence: 1}, text "Thinking…"  -> answer {"id": <streamId>}
    typing  {streamId, streamType: streaming, streamSequence: n}, text = everything so far
    message {streamId, streamType: final}, text = the final answer

Teams wants each streaming text to extend the one before (so the whole
answer so far is sent, ``chunk.so_far``), ``streamSequence`` to grow, and at
most about one update a second (the outbound path paces by
``min_edit_interval``, platforms.toml).  Streams are for personal chats only;
groups and channels get the final message alone.

The sequence comes from the clock -- tenths of a second since the stream
started, carried in the handle (``<streamId>|<started ms>``) -- so a process
restarted mid-answer continues the same stream with a larger number.  Teams
refuses more of a stream with 403 ``ContentStreamNotAllowed`` once the
learner pressed Stop or two minutes passed: further updates are dropped and
the final answer goes as an ordinary message -- unless Teams says the stream
was already completed, which is a finish retried after its answer was lost,
and then nothing more is sent.
"""

from __future__ import annotations

import logging
import time

from channels.msteams.transport import ConnectorApi
from gateway.core.errors import Forbidden
from gateway.core.messages import MessageId, SentMessage

log = logging.getLogger(__name__)


def _entity(stream_id: str | None, kind: str, sequence: int | None) -> dict:
    info: dict = {"type": "streaminfo", "streamType": kind}
    if stream_id:
        info["streamId"] = stream_id
    if sequence is not None:
        info["streamSequence"] = sequence
    return info


class Streams:
    """The open streams of one bot; nothing but the refused ones is kept between calls."""

    def __init__(self, api: ConnectorApi) -> None:
        self.api = api
        self._refused: set[str] = set()
        self._last: dict[str, int] = {}

    async def open(self, service_url: str, conversation: str, informative: str) -> str:
        stream_id = await self.api.post(service_url, conversation, {
            "type": "typing", "text": informative, "entities": [_entity(None, "informative", 1)]})
        return f"{stream_id}|{int(time.time() * 1000)}"

    def _sequence(self, handle: str) -> int:
        _, _, started = handle.partition("|")
        step = max(2, int((time.time() * 1000 - int(started or 0)) // 100) + 2)
        step = max(step, self._last.get(handle, 0) + 1)
        self._last[handle] = step
        return step

    async def update(self, service_url: str, conversation: str, handle: str, so_far: str) -> None:
        stream_id = handle.partition("|")[0]
        if stream_id in self._refused or not so_far.strip():
            return
        try:
            await self.api.post(service_url, conversation, {
                "type": "typing", "text": so_far, "entities": [_entity(stream_id, "streaming", self._sequence(handle))]})
        except Forbidden as error:
            self._refused.add(stream_id)
            log.info("msteams stream refused, the final answer follows alone stream=%s said=%s", stream_id, error)

    async def close(self, service_url: str, conversation: str, handle: str, text: str) -> SentMessage:
        stream_id = handle.partition("|")[0]
        self._last.pop(handle, None)
        final = {"type": "message", "text": text, "textFormat": "markdown"}
        if stream_id not in self._refused:
            try:
                await self.api.post(service_url, conversation, {**final, "entities": [_entity(stream_id, "final", None)]})
                return SentMessage(message=MessageId(stream_id))
            except Forbidden as error:
                if "completed" in str(error):
                    return SentMessage(message=MessageId(stream_id))
                log.info("msteams stream ended by Teams, answering in a message stream=%s said=%s", stream_id, error)
        self._refused.discard(stream_id)
        return SentMessage(message=MessageId(await self.api.post(service_url, conversation, final)))
