"""The one ledger of what the HTTP server holds, and the decisions that keep it bounded.

The embedded uvicorn keeps every connection it accepts for as long as the peer
keeps it open.  Without limits a few hundred half-sent requests use up the
process's file descriptors, and then nothing -- ``/healthz`` included -- gets
an answer.  The ``http.*`` limits of the config bound what one peer can hold:

- ``header_timeout_s``: a connection must finish its request line and headers
  in time, or it is closed (``gateway.http.protocol``);
- ``max_connections``: a request on a connection accepted beyond it is
  answered 503 at once, with ``Connection: close``;
- ``max_streams`` and ``max_streams_per_address``: event streams, which hold a
  connection and a task for as long as a page is open, get a share of their
  own; beyond it 503 (everyone's share is taken) or 429 (this address's is)
  (``gateway.http.streams``).

The protocol and the stream guard write :class:`HttpLoad`; ``/status`` and
``/metrics`` read it.  Importing this module loads neither Starlette nor uvicorn.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from enum import Enum

from gateway.core.config import HttpConfig
from gateway.status import HttpStatus

log = logging.getLogger(__name__)

REFUSAL_LOG_EVERY_S = 60.0
"""Under a flood, one log line per kind of refusal per minute, carrying the count since the last."""


class StreamRefusal(str, Enum):
    TOTAL = "total"
    """Every one of ``max_streams`` is taken."""
    ADDRESS = "address"
    """This client address holds ``max_streams_per_address`` already."""


class _QuietLog:
    """Logs the first of a kind of event, then at most one line per interval with how many came since."""

    def __init__(self, message: str) -> None:
        self.message = message
        self._unlogged = 0
        self._next_at = 0.0

    def note(self, detail: str) -> None:
        self._unlogged += 1
        now = time.monotonic()
        if now >= self._next_at:
            log.warning("%s %s count=%d", self.message, detail, self._unlogged)
            self._unlogged = 0
            self._next_at = now + REFUSAL_LOG_EVERY_S


class HttpLoad:
    """Open connections and streams, against the configured limits; refusals counted since start."""

    def __init__(self, config: HttpConfig) -> None:
        self.config = config
        self.connections = 0
        self.streams = 0
        self._streams_by_address: Counter[str] = Counter()
        self.refused_connections = 0
        self.refused_streams = 0
        self.header_timeouts = 0
        self.open_files_limit: int | None = None
        """Set by ``serve`` once it raised the soft RLIMIT_NOFILE (``gateway.openfiles``)."""
        self._refusals = _QuietLog("http connection refused reason=max_connections")
        self._stream_refusals = _QuietLog("http stream refused")
        self._timeouts = _QuietLog("http connection closed reason=header_timeout")

    # -- connections (gateway.http.protocol) ------------------------------------------------

    def connection_opened(self) -> bool:
        """Count a new connection; False when it is one beyond ``max_connections`` (its request gets 503)."""
        self.connections += 1
        return self.connections <= self.config.max_connections

    def connection_closed(self) -> None:
        self.connections -= 1

    def connection_refused(self, client: str) -> None:
        self.refused_connections += 1
        self._refusals.note(f"client={client} limit={self.config.max_connections}")

    def header_timed_out(self, client: str) -> None:
        self.header_timeouts += 1
        self._timeouts.note(f"client={client} after_s={self.config.header_timeout_s:g}")

    # -- event streams (gateway.http.streams) -----------------------------------------------

    def take_stream(self, address: str) -> StreamRefusal | None:
        """Hold a stream slot for ``address``, or say why not (and count the refusal)."""
        refusal = None
        if self.streams >= self.config.max_streams:
            refusal = StreamRefusal.TOTAL
        elif self._streams_by_address[address] >= self.config.max_streams_per_address:
            refusal = StreamRefusal.ADDRESS
        if refusal is not None:
            self.refused_streams += 1
            self._stream_refusals.note(f"reason={refusal.value} client={address} streams={self.streams}")
            return refusal
        self.streams += 1
        self._streams_by_address[address] += 1
        return None

    def release_stream(self, address: str) -> None:
        self.streams -= 1
        self._streams_by_address[address] -= 1
        if self._streams_by_address[address] <= 0:
            del self._streams_by_address[address]

    def streams_of(self, address: str) -> int:
        return self._streams_by_address.get(address, 0)

    def report(self) -> HttpStatus:
        return HttpStatus(
            connections=self.connections,
            max_connections=self.config.max_connections,
            streams=self.streams,
            max_streams=self.config.max_streams,
            max_streams_per_address=self.config.max_streams_per_address,
            header_timeout_s=self.config.header_timeout_s,
            refused_connections=self.refused_connections,
            refused_streams=self.refused_streams,
            header_timeouts=self.header_timeouts,
            open_files_limit=self.open_files_limit,
        )
