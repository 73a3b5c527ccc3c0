"""How long a test waits for what should happen: so long that only a hang misses it.

A loaded machine (other work on both of two cores) makes everything several
times slower, and a fresh process's first turn imports the model library; a
wait in a test only turns a hang into a failure, it never measures speed
(``bench/`` does).  Waits that expect something *not* to happen (a message
that must not arrive) are the test's own business and stay short.
"""

from __future__ import annotations

HANG_S = 120.0
"""Every liveness wait: a reply, a line of output, a process starting or stopping, a peer listening."""
HTTP_S = 60.0
"""A test client's timeout for one request to a loopback peer or the gateway."""


def tries(every: float) -> range:
    """The rounds of a poll loop that sleeps ``every`` seconds, bounded by :data:`HANG_S`."""
    return range(int(HANG_S / every) + 1)
