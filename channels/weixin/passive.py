"""Passive replies: an answer ready within the deadline rides in the callback's own HTTP response.

WeChat waits 5 s for the answer to a callback (X1).  A callback that was made
durable opens a *slot* for its message and waits in it, up to
``passive_reply_s`` from its arrival (4.5 s, platforms.toml).  The outbound
path sends the reply's first part as always; :meth:`PassiveSlots.offer` hands
the text to a callback still waiting, and the send is done.  When the wait ends
first, the slot is closed and a later offer finds none: the part goes as a
customer-service message.  Offer and close are each one synchronous step on the
event loop, so exactly one of them wins -- the answer is never both in the
response and sent again.

A taken offer is not yet a delivered answer: the send waits
(:meth:`PassiveSlots.handed_over`) until the callback's response carrying it has
been written, and only then does the outbound path record the part delivered.
A gateway killed in between has recorded nothing, so the part goes again after
the restart -- to WeChat's retry, which is waiting for it, or as a
customer-service message -- rather than being recorded delivered and never seen.
It also keeps a reply's parts in order: part 1 goes as a message only once part
0 is on its way back to WeChat.

WeChat retries a message it got no answer to in time.  A retry while the first
callback still waits is answered ``success`` at once (its answer comes one way
or the other); a retry after a passive reply was given -- whose response WeChat
never got -- is given the same answer again, from a bounded memory.  Either way
the pipeline's dedup has already answered it once, and the learner sees one
answer.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

REMEMBERED = 1000
"""Passive answers kept for WeChat's retries; a retry comes within seconds, so a few hundred are plenty."""
HANDOVER_S = 1.0
"""How long a taken offer waits for its response to be written; past it the callback has gone (WeChat hung
up), and the answer is counted sent -- kept for the retry, which gets it from :meth:`PassiveSlots.given`."""


class PassiveSlots:
    """One account's callbacks waiting for their answers, by message id."""

    def __init__(self) -> None:
        self._open: dict[str, asyncio.Future[str]] = {}
        self._given: OrderedDict[str, str] = OrderedDict()
        self._written: dict[str, asyncio.Event] = {}

    def given(self, key: str) -> str | None:
        """The passive answer already given to this message, for WeChat's retry of it."""
        return self._given.get(key)

    def open(self, key: str) -> asyncio.Future[str] | None:
        """A slot for this message; None when a callback for it already waits (a retry)."""
        if key in self._open:
            return None
        slot: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._open[key] = slot
        return slot

    def offer(self, key: str, text: str) -> bool:
        """Give ``text`` to the callback waiting for this message; False when none waits any more."""
        slot = self._open.get(key)
        if slot is None or slot.done():
            return False
        slot.set_result(text)
        self._written[key] = asyncio.Event()
        self._given[key] = text  # kept now: should this callback's response be lost, WeChat's retry gets it
        while len(self._given) > REMEMBERED:
            self._given.popitem(last=False)
        return True

    async def handed_over(self, key: str, timeout_s: float = HANDOVER_S) -> bool:
        """Wait until the response carrying this message's taken offer was written; False if it never was."""
        written = self._written.get(key)
        if written is None:
            return True
        try:
            await asyncio.wait_for(written.wait(), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            self._written.pop(key, None)

    def written(self, key: str) -> None:
        """The callback's response with the answer went out (run after the response was sent)."""
        written = self._written.get(key)
        if written is not None:
            written.set()

    async def wait(self, key: str, slot: asyncio.Future[str], timeout_s: float) -> str | None:
        """The answer offered within ``timeout_s``, or None -- and the slot is closed either way."""
        try:
            if timeout_s > 0 and not slot.done():
                await asyncio.wait({slot}, timeout=timeout_s)
        finally:
            self.close(key)
        if not slot.done() or slot.cancelled():
            return None
        return slot.result()

    def close(self, key: str) -> None:
        """No more offers for this message: the next part goes as a customer-service message."""
        slot = self._open.pop(key, None)
        if slot is not None and not slot.done():
            slot.cancel()
