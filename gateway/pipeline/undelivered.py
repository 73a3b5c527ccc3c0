"""What did not reach the learner, per account since start: how often, and the last reason.

Two things end that way: a dead letter (a reply given up on: a permanent
error, attempts exhausted, a closed reply window) and a shortfall (a reply
sent without some of its parts or files: over the platform's messages per
inbound message, a file over its size limit).  Each reason is also on the
reply's outbox row and in the log; this tally is what ``/status`` shows per
account, so a teacher sees that answers go missing without reading logs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Tally:
    count: int = 0
    last_reason: str = ""


class Undelivered:
    def __init__(self) -> None:
        self._by_account: dict[tuple[str, str], Tally] = {}

    def note(self, channel: str, account: str, reason: str) -> None:
        tally = self._by_account.setdefault((channel, account), Tally())
        tally.count += 1
        tally.last_reason = reason

    def of(self, channel: str, account: str) -> Tally:
        return self._by_account.get((channel, account), Tally())
