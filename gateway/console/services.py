"""What the console needs from the running gateway: one Protocol, grown by the areas that use it.

The console is handed the gateway by the HTTP app (``gateway.http.app.build_app``), as the admin
API is handed its memory controls; it never builds a service of its own, so a transcript, a memory
edit or a takeover made here is the same one the chat commands and the CLI make.  Each area of the
console adds the members it reads here, with a docstring saying why, and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from brain.usage import DayUsage
from gateway.core.config import Binding
from gateway.core.probes import ProbeResult
from gateway.pipeline.dispatch import Dispatcher
from gateway.pipeline.routing import Router
from gateway.status import StatusReport
from gateway.store import Store
from gateway.store.accounts import StoredAccount
from gateway.store.activity import ActivityRow
from gateway.takeover import TeacherDesk

if TYPE_CHECKING:  # pragma: no cover - typing only
    from brain.knowledge.service import KnowledgeService
    from brain.memory.guarded import GuardedControls
    from gateway.core.config import Config, PartnerConfig


@dataclass(frozen=True)
class UsageToday:
    """What one learner spent with one partner today (UTC), against the persona's daily budget."""

    tokens: int
    budget: int | None
    """The persona's ``daily_token_budget_per_learner``; None when the learner's day is unbounded."""
    partner_tokens: int
    partner_budget: int | None
    """The persona's ``daily_token_budget_per_partner`` (every learner of the partner together)."""


class ConsoleGateway(Protocol):
    """The running gateway as the console sees it (``gateway.app.Gateway`` provides it)."""

    @property
    def ready(self) -> bool:
        """True between a completed ``start()`` and the beginning of ``stop()``."""
        ...

    async def status(self) -> StatusReport:
        """Every channel account's state and reason, as ``/status`` reports them."""
        ...

    # ---------------------------------------------------------------- conversations and pairing

    @property
    def store(self) -> Store:
        """The gateway's store: transcripts (inbox and outbox), pairing codes, takeovers."""
        ...

    @property
    def router(self) -> Router:
        """Which partner a conversation or a pairing code belongs to (so :class:`Viewer` can judge it)."""
        ...

    @property
    def teacher(self) -> TeacherDesk:
        """The desk the ``/reply`` and ``/handback`` chat commands drive: the console takes over through it."""
        ...

    @property
    def dispatcher(self) -> Dispatcher:
        """Answers an approved learner's held messages now (``release_approved``), not at the next sweep."""
    # ------------------------------------------------------------------ channels and dashboard (gateway.console.channels)

    async def disable_account(self, channel: str, account: str, by: str) -> None:
        """Stop a channel account and store the switch, so it stays stopped across restarts (KeyError: unknown)."""
        ...

    async def enable_account(self, channel: str, account: str) -> None:
        """Forget the switch and start the account again."""
        ...

    async def restart_account(self, channel: str, account: str) -> bool:
        """Start the account's run again now; False for a disabled one (enable it instead)."""
        ...

    async def disabled_accounts(self) -> dict[tuple[str, str], str]:
        """(channel, account) -> the console user who disabled it."""
        ...

    async def activity_since(self, since: float) -> list[ActivityRow]:
        """The store's hourly sums of messages, drops, errors and latencies from ``since`` on."""
        ...

    async def model_use(self, since_day: str) -> list[DayUsage]:
        """Model tokens and cost per UTC day and partner (the brain's usage ledger)."""
        ...

    # ------------------------------------------------------------------ accounts added in the console (gateway.console.accounts)

    def login_page(self, channel: str, account: str) -> str | None:
        """The page (path and its token) where the account's login is completed while it waits for one: personal
        WeChat's QR code; None for every other account."""
        ...

    def stored_accounts(self) -> dict[tuple[str, str], StoredAccount]:
        """The channel accounts added in the console (their settings sealed): which ones the console may delete."""
        ...

    def account_bindings(self) -> tuple[Binding, ...]:
        """The file's bindings and the console-made accounts' -- who answers an account, for :class:`Viewer`."""
        ...

    async def add_account(self, channel: str, account: str, partner: str, raw: dict[str, Any], by: str) -> ProbeResult:
        """Probe the settings; only when the probe passes, store them sealed and start the account bound to
        ``partner`` (``gateway.accounts.AccountRefused``: a name taken or no key; ConfigError: bad settings)."""
        ...

    def stored_settings(self, channel: str, account: str) -> dict[str, Any]:
        """A console-made account's settings opened, so the console can say which secrets are set (never show them)."""
        ...

    async def replace_secrets(self, channel: str, account: str, secrets: dict[str, str], by: str) -> ProbeResult:
        """Probe with the new secrets; only when it passes, seal them and start the account again with them."""
        ...

    async def remove_account(self, channel: str, account: str, by: str) -> None:
        """Stop and forget a console-made account (KeyError: not one)."""
        ...

    # ------------------------------------------------------------------ learners and knowledge (gateway.console.learners, .knowledge)

    @property
    def memory_controls(self) -> GuardedControls | None:
        """The brain's memory controls -- the very instance the admin API uses, sharing the turns' locks, so an
        edit or a forget waits for the learner's running turn; None with a plugged-in responder."""
        ...

    @property
    def knowledge(self) -> KnowledgeService | None:
        """The brain's knowledge service, the one its ``knowledge_search`` tool asks (``partners kb`` builds the
        same wiring); None with a plugged-in responder."""
        ...

    async def usage_today(self, partner: PartnerConfig, person: str) -> UsageToday | None:
        """A learner's tokens today with ``partner``, from the brain's usage ledger; None without the brain."""
        ...

    # ------------------------------------------------------------------ partners (gateway.console.partners, .personas)

    @property
    def config(self) -> Config:
        """The config the gateway runs now: what it started with, with the partners a console edit applied."""
        ...

    def apply(self, config: Config) -> None:
        """Take an edited file's partners and bindings live, without restarting a channel (docs/adr/0039)."""
        ...

    async def trial_turn(self, partner_id: str, who: str, text: str) -> str:
        """One turn of the partner for the console's chat panel, as the learner ``console:<who>``; the reply."""
        ...
