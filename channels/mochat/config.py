"""Mochat account settings: where the server is, the claw token, and which sessions and panels to hear.

A claw agent (Mochat's word for a bot account) is registered once on Mochat and
gets a ``claw_token`` and its own user id.  The agent hears *sessions* (private
conversations Mochat opens between the agent and people) and *panels* (the text
channels of a group).  Both are listed here by id: Mochat pushes only what the
agent subscribed to.  Whether a panel message must @-mention the agent is the
gateway's ordinary group policy (``access.group`` / ``access.groups.<panel>``),
not a Mochat setting.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from gateway.core.config import AccountConfig, EnvSecret

CLOUD = "https://mochat.io"


class MochatConfig(AccountConfig):
    base_url: str = CLOUD
    """Mochat's server: the REST routes (``/api/claw/...``) and, unless ``socket_url`` says otherwise, the socket."""
    socket_url: str | None = None
    """Where the Socket.IO endpoint lives when it is not ``base_url``."""
    socket_path: str = "/socket.io"
    claw_token: EnvSecret
    """The agent's claw token (``claw_...``), read from the environment (``env:NAME``); never logged."""
    agent_user_id: str = Field(min_length=1)
    """The agent's own user id: its own messages are not answered, and a mention of it addresses it."""
    sessions: tuple[str, ...] = ()
    """Session ids to hear (direct conversations)."""
    panels: tuple[str, ...] = ()
    """Panel ids to hear (a group's text channels)."""
    watch_timeout_s: float = Field(default=25.0, gt=0)
    """How long one long poll of the fallback waits for news (Mochat's ``watchTimeoutMs``)."""
    panel_poll_s: float = Field(default=5.0, gt=0)
    """While polling, how often each panel's latest messages are read (panels have no long poll)."""
    watch_limit: int = Field(default=100, gt=0, le=1000)
    connect_timeout_s: float = Field(default=10.0, gt=0)
    """How long the socket's connect and subscribe may take before the fallback polls instead."""
    socket_retry_max_s: float = Field(default=60.0, gt=0)
    """While polling, the socket is tried again after a growing wait of at most this."""

    @model_validator(mode="after")
    def _check(self) -> MochatConfig:
        if not self.sessions and not self.panels:
            raise ValueError("name at least one session or panel to hear (sessions: [...] or panels: [...])")
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))
        return self

    @property
    def socket_base(self) -> str:
        return (self.socket_url or self.base_url).rstrip("/")
