"""Durable, then 2xx within the platform's deadline.

A webhook's events are handed to ``sink.accept`` and the platform is answered
only once that returned (``channels/base.py``): an answer before the write is
a message lost in a crash.  Slack, Feishu and QQ give three seconds, WeChat
and WeCom five (``ack_deadline_s`` in ``channels/platforms.toml``); past that
the platform retries, and the retry is a duplicate the inbox drops.  So the
answer is never sent early -- the accept is timed instead, and an accept that
took longer than the deadline is logged and counted, because it means the
store is too slow for that platform and retries are about to pile up.  The
count goes to the sink (``sink.late_ack``), which the gateway turns into
``partners_late_acks_total{channel,account}`` on ``/metrics``.

If the accept fails, nothing is answered but the error (the HTTP app's 5xx,
which the platform retries), and the request's replay claim is released so
that retry is not refused as a replay.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from starlette.responses import Response

from channels._kit.replay import ReplayMemory
from channels._kit.signatures import Verified
from gateway.core.capabilities import capabilities_of
from gateway.core.messages import InboundMessage

log = logging.getLogger(__name__)


class Sink(Protocol):
    """What of the channel's sink (``gateway.core.channel.InboundSink``) the clock uses: it makes the
    events durable, and hears of every answer that came too late -- the gateway counts those in its
    metrics, which the kit knows nothing of."""

    async def accept(self, messages: Sequence[InboundMessage]) -> None: ...

    def late_ack(self, took_s: float, deadline_s: float) -> None: ...


class AckClock:
    """How long one account's webhooks took to become durable, against its platform's ack deadline."""

    def __init__(self, platform: str, account: str, deadline_s: float | None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.platform, self.account, self.deadline_s, self._clock = platform, account, deadline_s, clock
        self.late = 0
        """Accepts that took longer than the deadline, since start."""
        self.slowest_s = 0.0

    @classmethod
    def of(cls, platform: str, account: str) -> AckClock:
        """The clock for ``platform``'s declared ``ack_deadline_s``."""
        return cls(platform, account, capabilities_of(platform).ack_deadline_s)

    async def accept(self, sink: Sink, messages: Sequence[InboundMessage], *, verified: Verified | None = None,
                     replays: ReplayMemory | None = None) -> None:
        """``await sink.accept(messages)``, timed against the deadline.  For a channel whose SDK writes the
        answer itself once this returned (slack-bolt's ``process_before_response``, a socket's envelope ack)."""
        started = self._clock()
        try:
            if messages:
                await sink.accept(messages)
        except BaseException:
            if replays is not None and verified is not None and verified.replay_key is not None:
                replays.release(verified.replay_key)
            raise
        took = self._clock() - started
        self.slowest_s = max(self.slowest_s, took)
        if self.deadline_s is not None and took > self.deadline_s:
            self.late += 1
            log.warning("webhook made durable after the ack deadline platform=%s account=%s took_s=%.3f deadline_s=%g "
                        "late_total=%d", self.platform, self.account, took, self.deadline_s, self.late)
            sink.late_ack(took, self.deadline_s)

    async def accept_then_answer(self, sink: Sink, messages: Sequence[InboundMessage], answer: Response | None = None,
                                 *, verified: Verified | None = None, replays: ReplayMemory | None = None) -> Response:
        """``await sink.accept(messages)``, then ``answer`` (an empty 200 when None)."""
        await self.accept(sink, messages, verified=verified, replays=replays)
        return answer if answer is not None else Response(status_code=200)
