"""The gateway's self-report, as served by ``GET /status`` and ``partners status``."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel


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


class UnavailableChannel(BaseModel):
    channel: str
    account: str
    reason: str


class StatusReport(BaseModel):
    version: str
    started_at: datetime
    partners: list[str]
    accounts: list[AccountStatus]
    unavailable: list[UnavailableChannel]
    responder: str
