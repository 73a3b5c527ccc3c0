"""Faults an emulated platform injects into the bot's sends, drawn from a seeded RNG.

The relay platform and the Telegram Bot API emulator both answer a send with
one of these outcomes, either forced for the next sends (``next``) or at random
rates, so crash tests replay exactly from their seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Faults:
    rate_429: float = 0.0
    rate_5xx: float = 0.0
    rate_lost: float = 0.0
    retry_after: float = 1.0
    next: list[str] = field(default_factory=list)
    """Forced outcomes of the next sends: "429", "503", "504" (posted, answer lost), "401", "400"."""
    down: bool = False
    """Every call fails, as if the platform were unreachable."""
    send_latency: float = 0.0
    """Seconds a send takes to answer *after* the message is posted (a slow response)."""
    file_hold: bool = False
    """File downloads hang (a stuck file server) until this is set back to False."""
    file_status: int = 0
    """File downloads answer this HTTP status instead of the file (0: serve the file)."""

    def draw(self, rng: random.Random) -> str | None:
        """The outcome of the next send: a forced one, else 429 / 503 / 504 at their rates, else None (success)."""
        if self.next:
            return self.next.pop(0)
        roll = rng.random()
        for outcome, rate in (("429", self.rate_429), ("503", self.rate_5xx), ("504", self.rate_lost)):
            if roll < rate:
                return outcome
            roll -= rate
        return None
