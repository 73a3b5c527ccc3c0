"""The gateway's self-report, as served by ``GET /status`` and ``partners status``.

:meth:`StatusReport.problems` is the one definition of "something needs the
teacher": an account that is in error, waits for a human or could not start,
and a partner whose model fails (or is answered by its backup only).
``partners status`` exits non-zero while there is one.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from gateway.store.health import StoreCondition, StoreState

ACCOUNT_ERROR_STATES = frozenset({"error", "action_required"})
MODEL_ERROR_STATES = frozenset({"failing", "degraded"})


class AccountStatus(BaseModel):
    channel: str
    account: str
    state: str
    reason: str = ""
    since: datetime | None = None
    restarts: int = 0
    last_event_at: datetime | None = None
    inbound_pending: int = 0
    inbound_held: int = 0
    outbox_open: int = 0
    undelivered: int = 0
    """Replies given up on or sent short (over the platform's budget or file limit) since start."""
    last_undelivered: str = ""
    """Why the latest of those did not arrive whole."""


class UnavailableChannel(BaseModel):
    channel: str
    account: str
    reason: str


class ModelStatus(BaseModel):
    """One partner's model: ``none`` (no model: answers from notes), ``untried``, ``ok``, ``degraded``, ``failing``."""

    partner: str
    model: str = ""
    """The partner's own model (its ``model:``, else its persona's); empty when there is none."""
    backup: str = ""
    state: str
    kind: str = ""
    """What failed, as a ``ModelErrorKind`` value: timeout, unreachable, transient, rate_limited, auth, ..."""
    reason: str = ""
    since: datetime | None = None
    """When the state began (for failing and degraded: the first failure of the current run)."""
    failures: int = 0
    """Failed attempts since the partner's own model last answered."""


class HttpStatus(BaseModel):
    """What the HTTP server holds against its limits, and how often it said no (counts since start)."""

    connections: int
    max_connections: int
    streams: int
    max_streams: int
    max_streams_per_address: int
    header_timeout_s: float
    refused_connections: int = 0
    """Requests answered 503 because they came on a connection beyond ``max_connections``."""
    refused_streams: int = 0
    """Event streams answered 503 (all ``max_streams`` taken) or 429 (their address's share taken)."""
    header_timeouts: int = 0
    """Connections closed because their request line and headers did not arrive within ``header_timeout_s``."""
    open_files_limit: int | None = None
    """The process's soft RLIMIT_NOFILE after start-up raised it (None where the platform has none)."""


class StoreStatus(BaseModel):
    """The gateway store: ``ok``, or ``failing`` (writes fail: a full disk, an I/O error) with the last error."""

    state: str = "ok"
    error: str = ""
    since: datetime | None = None
    failures: int = 0
    """Failed writes since the last one that worked."""
    recoveries: int = 0
    """Times it failed and came back in this run (each time, pending work was resumed)."""

    @classmethod
    def of(cls, condition: StoreCondition) -> StoreStatus:
        return cls(state=condition.state.value, error=condition.error, since=condition.since,
                   failures=condition.failures, recoveries=condition.recoveries)


class StatusReport(BaseModel):
    version: str
    started_at: datetime
    partners: list[str]
    accounts: list[AccountStatus]
    unavailable: list[UnavailableChannel]
    responder: str
    models: list[ModelStatus] = []
    http: HttpStatus | None = None
    """None when no HTTP server runs in this process."""
    store: StoreStatus = StoreStatus()

    def problems(self) -> list[str]:
        """What is in error, one line each (empty: all is well)."""
        found = [f"{a.channel}/{a.account} is {a.state}" + (f": {a.reason}" if a.reason else "")
                 for a in self.accounts if a.state in ACCOUNT_ERROR_STATES]
        found += [f"{u.channel}/{u.account} is not running: {u.reason}" for u in self.unavailable]
        found += [f"partner {m.partner}'s model {m.model} is {m.state}" + (f": {m.reason}" if m.reason else "")
                  for m in self.models if m.state in MODEL_ERROR_STATES]
        if self.store.state == StoreState.FAILING.value:
            found.append(f"the store's writes fail: {self.store.error} (fix: free disk space; pending work resumes by itself)")
        return found
