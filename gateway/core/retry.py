"""When a failed call to a platform is tried again: the one backoff formula of the project.

The outbound path retries sends with it (:mod:`gateway.pacing` paces them), and
the channel kit's transports wait with it before polling or connecting again
(:mod:`channels._kit.retry`).  It lives in the vocabulary because both sides
read it and it reads nothing but the error tree: one formula, not one per loop.
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gateway.core.errors import ChannelUnavailable, ConfigError, PermanentError, RateLimited

_PERMANENT = (PermanentError, ConfigError, ChannelUnavailable)
"""Errors no retry can fix: the platform refused for good, or our configuration is wrong."""


class RetryPolicy(BaseModel):
    """When to try a failed send again, and when to give up.

    ``max_attempts`` counts every attempt, the first included.  Backoff uses
    full jitter -- a delay drawn from ``[0, min(max_delay, base_delay * 2**(n-1))]``
    -- so sends that failed together do not return together.  A platform's
    ``retry_after`` is honoured as given, even beyond ``max_delay`` (retrying
    sooner only earns another 429), plus up to ``jitter`` seconds.

    An exception outside the error tree is a bug in a channel; it is retried
    like a transient error, because a bug should not lose a reply forever,
    and ``max_attempts`` still bounds it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_delay: float = Field(default=1.0, gt=0)
    max_delay: float = Field(default=60.0, gt=0)
    max_attempts: int = Field(default=5, ge=1)
    jitter: float = Field(default=1.0, ge=0, description="most seconds added to a platform's retry_after")

    @model_validator(mode="after")
    def _max_covers_base(self) -> RetryPolicy:
        if self.max_delay < self.base_delay:
            raise ValueError(f"max_delay ({self.max_delay}) is below base_delay ({self.base_delay})")
        return self

    def delay_for(self, attempt: int, error: Exception) -> float | None:
        """Seconds to wait before the next attempt, or None to give up.

        ``attempt`` is the 1-based number of the attempt that just failed with ``error``.
        """
        if attempt < 1:
            raise ValueError(f"attempt numbers start at 1, got {attempt}")
        if isinstance(error, _PERMANENT) or attempt >= self.max_attempts:
            return None
        if isinstance(error, RateLimited):
            return error.retry_after + random.uniform(0.0, self.jitter)
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** min(attempt - 1, 64))
        return random.uniform(0.0, ceiling)
