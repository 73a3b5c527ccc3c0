"""MatrixConfig: one bot account on one homeserver."""

from __future__ import annotations

from enum import Enum

from pydantic import Field, model_validator

from gateway.core.config import AccountConfig, EnvSecret


class InvitePolicy(str, Enum):
    """Which room invitations the bot accepts by itself; the rest it declines (leaves)."""

    ANYONE = "anyone"
    ALLOWED = "allowed"  # only from the MXIDs (or ``*:server`` patterns) in ``invite_from``
    NEVER = "never"  # a teacher joins the bot to rooms by other means


class MatrixConfig(AccountConfig):
    homeserver: str = Field(description="client-server API base URL, e.g. https://matrix.example.org")
    user_id: str = Field(description="the bot's MXID, e.g. @tutor:example.org")
    access_token: EnvSecret | None = None
    """Preferred: a token of a device made for the gateway (``env:MATRIX_TOKEN``)."""
    password: EnvSecret | None = None
    """Alternative: log in with the password at every start, always as ``device_id``."""
    device_id: str | None = None
    """The device the gateway sends from.  Keep it fixed: the homeserver deduplicates sends per device."""
    device_name: str = "Partners Gateway"
    invites: InvitePolicy = InvitePolicy.ANYONE
    invite_from: tuple[str, ...] = ()
    sync_timeout_s: float = Field(default=25.0, gt=0, le=60)
    """How long one /sync may wait on the server (the supervisor's stall limit is 90 s)."""
    timeline_limit: int = Field(default=100, ge=1, le=1000)
    """Events per room per /sync; a longer gap is paged in with /messages, never skipped."""

    @model_validator(mode="after")
    def _one_way_to_log_in(self) -> MatrixConfig:
        if self.access_token is None and self.password is None:
            raise ValueError("set access_token (preferred) or password for the Matrix account")
        if self.password is not None and not self.device_id:
            raise ValueError("password login needs a fixed device_id, so sends are deduplicated across restarts")
        if not self.user_id.startswith("@") or ":" not in self.user_id:
            raise ValueError(f"user_id must be a full MXID like @tutor:example.org, not {self.user_id!r}")
        return self

    def invite_allowed(self, inviter: str) -> bool:
        if self.invites is InvitePolicy.ANYONE:
            return True
        if self.invites is InvitePolicy.NEVER:
            return False
        for pattern in self.invite_from:
            if pattern == inviter or (pattern.startswith("*:") and inviter.endswith(pattern[1:])):
                return True
        return False
