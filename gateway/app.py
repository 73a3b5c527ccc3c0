"""The composition root: the one place that builds and wires everything.

Channels know the message vocabulary, never the brain; the brain knows the
vocabulary, never a platform.  Only this module knows both, builds the store,
the channels (each handed its sink, cursors and typed config), the pipeline
and the supervisor, and tears them down in the right order: stop listening,
finish in-flight work within the drain budget, then close.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import suppress
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from brain.health import ModelHealth
from brain.tools.services import ScheduleResult
from brain.usage import DayUsage
from channels.base import Channel, ChannelContext
from channels.registry import load_channel
from gateway import __version__, datadir
from gateway.accounts import AccountRefused, model_for_kind, seal, secrets_of, unseal, validate_settings, with_secrets
from gateway.activity import ActivityLog
from gateway.blob_gc import BlobCollector
from gateway.blobs import BlobStore, LocalBlobs
from gateway.configfile import validate_account
from gateway.core.capabilities import ChannelCapabilities, authenticates_senders
from gateway.core.config import AccessPolicy, Binding, Config, MidTurn, ModelSettings, PartnerConfig
from gateway.core.errors import ChannelUnavailable, ConfigError
from gateway.core.events import StreamEnd
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    OutboundReply,
    Sender,
    Text,
    UserId,
)
from gateway.core.phrases import catalogued, language_for
from gateway.core.probes import ProbeResult
from gateway.core.turns import Responder, Turn
from gateway.core.turns import Role as TurnRole
from gateway.http.limits import HttpLoad
from gateway.metrics import Metrics
from gateway.pacing import Pacer, RetryPolicy
from gateway.pipeline.delivery import Delivery, Outlet
from gateway.pipeline.dispatch import Dispatcher
from gateway.pipeline.ingest import Ingest
from gateway.pipeline.lanes import Lanes
from gateway.pipeline.media import MediaFetch
from gateway.pipeline.outbox import Outbox
from gateway.pipeline.resume import StoreWatch, resume
from gateway.pipeline.routing import Router
from gateway.redaction import register_secret
from gateway.reminders import ReminderDesk
from gateway.secretbox import KEY_ENV, MAKE_ONE, OLD_KEY_ENV, SecretBox
from gateway.status import AccountStatus, ModelStatus, StatusReport, StoreStatus, UnavailableChannel
from gateway.store import CursorTable, QueueDepths, Store
from gateway.store.accounts import StoredAccount
from gateway.store.activity import ActivityRow
from gateway.store.choice import configured_store
from gateway.store.health import StoreState
from gateway.supervisor import Supervisor
from gateway.takeover import TeacherDesk

if TYPE_CHECKING:  # pragma: no cover - typing only
    from brain.factory import BuiltBrain
    from brain.knowledge.service import KnowledgeService
    from brain.memory.guarded import GuardedControls
    from gateway.console.services import ConsoleGateway, UsageToday

log = logging.getLogger(__name__)
TRIAL_CHANNEL = "console"
"""The channel the console's chat panel speaks on (``Gateway.trial_turn``): its learners are ``console:<username>``."""

RESPONDER_ENV = "PARTNERS_RESPONDER"
"""``module:callable`` returning a Responder; lets tests and operators plug one in without code changes."""
SWEEP_INTERVAL_S = 2.0
PRUNE_INTERVAL_S = 3600.0


def responder_from_env() -> Responder | None:
    spec = os.environ.get(RESPONDER_ENV)
    if not spec:
        return None
    module, _, attr = spec.partition(":")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"cannot load responder {spec!r}: {error}", field=RESPONDER_ENV, fix="use module:callable") from None
    return factory()


class AccountCursors:
    """The CursorStore a channel account is handed: its own namespace in the store."""

    def __init__(self, store: CursorTable, channel: str, account: str) -> None:
        self.store, self.channel, self.account = store, channel, account

    async def get(self, name: str) -> str | None:
        return await self.store.get_cursor(self.channel, self.account, name)

    async def put(self, name: str, value: str, *, keep_s: float | None = None) -> None:
        await self.store.put_cursor(self.channel, self.account, name, value, keep_s=keep_s)


class _ReportedReminders:
    """Schedules through the reminder desk and tells the partner's teacher about every refusal
    (the brain's ``Scheduler``: the desk answers in the gateway's terms, this in the brain's)."""

    def __init__(self, reminders: ReminderDesk, teacher: TeacherDesk) -> None:
        self.reminders, self.teacher = reminders, teacher

    async def schedule(self, address: Address, at: datetime, text: str) -> ScheduleResult:
        outcome = await self.reminders.schedule(address, at, text)
        if not outcome.accepted:
            await self.teacher.report(address, f"A reminder could not be scheduled ({outcome.reason}): {text}")
        return ScheduleResult(accepted=outcome.accepted, reason=outcome.reason)


class Gateway:
    def __init__(
        self,
        config: Config,
        *,
        responder: Responder | None = None,
        store: Store | None = None,
        channel_classes: Mapping[str, type[Channel]] | None = None,
    ) -> None:
        self.config = config
        self.channel_classes = dict(channel_classes or {})
        """Channels supplied by an embedding program (or a test) instead of the registry."""
        self.metrics = Metrics()
        self.http_load = HttpLoad(config.http)
        """What the HTTP server holds against ``http.*`` limits; ``/status`` and the metrics read it."""
        self.metrics.watch_http(self.http_load.report)
        self.store: Store = store or configured_store(config)
        self.router = Router([self._with_persona_defaults(p) for p in config.partners], config.bindings)
        self.supervisor = Supervisor()
        self.activity = ActivityLog(self.metrics, self.store, self._partner_of_account)
        """The metrics' counts, added to the store's hourly sums for the console's dashboard (:mod:`gateway.activity`)."""
        # Built in dependency order, no late binding: the outbox needs only the store; the teacher desk
        # and the reminders write through it; the brain is lent both; the lanes run the brain and
        # subscribe to the outbox to deliver what the others write.
        self.outbox = Outbox(self.store)
        self.delivery = Delivery(self.store, self.metrics, on_shortfall=self._tell_shortfall, language_of=self._language_of)
        self.reminders = ReminderDesk(self.store, self._capabilities)
        self.teacher = TeacherDesk(self.store, self.router, self.outbox)
        blobs = LocalBlobs(config.data_dir / "blobs")
        self.blobs: BlobStore = blobs
        """Inbound files once fetched, by content hash (a folder now; object storage behind the same seam later)."""
        self.blob_gc = BlobCollector(self.store, blobs, config.pipeline.blob_retention_s)
        """Removes files no stored message needs any more, and a forgotten learner's at once (lent to the brain)."""
        self.model_health = ModelHealth(on_error=self._count_model_error)
        """How each partner's model calls go, as the brain reports them; ``/status`` and the metrics read it."""
        given = responder or responder_from_env()
        self.brain: BuiltBrain | None = None
        """The gateway's own brain and its parts (the teachers' memory controls, the knowledge service),
        closed by :meth:`stop`; None with a plugged-in responder, whose memory is not the brain's."""
        self.responder: Responder
        if given is None:
            self.brain = self._build_brain()
            self.responder = self.brain.responder
        else:
            self.responder = given
        self.own_brain = self.brain is not None
        """True when the gateway built its brain (and so may call a model); False with a plugged-in responder."""
        media = MediaFetch(self.store, self.blobs, self.channel, timeout_s=config.pipeline.media_fetch_timeout_s)
        self.lanes = Lanes(self.store, self.outbox, self.delivery, self.responder, config.pipeline, self._outlet, media)
        self.dispatcher = Dispatcher(self.store, self.outbox, self.metrics, self.router, self.lanes, self._policy,
                                     self.teacher, self._authenticates)
        self.store_watch = StoreWatch(self.store, self.outbox, self.dispatcher, self.lanes, self._runs, self.metrics)
        self._channels: dict[tuple[str, str], Channel] = {}
        self._outlets: dict[tuple[str, str], Outlet] = {}
        self._policies: dict[tuple[str, str], AccessPolicy] = {}
        self.unavailable: list[UnavailableChannel] = []
        self._disabled: dict[tuple[str, str], str] = {}
        """Accounts an operator disabled -> the reason shown; loaded from the store at start."""
        self._stored: dict[tuple[str, str], StoredAccount] = {}
        """Channel accounts added in the console (ADR 0040), loaded from the store at start."""
        self._tasks: list[asyncio.Task[None]] = []
        self.started_at = datetime.now(UTC)
        self.ready = False
        self._data_lock: int | None = None

    # ------------------------------------------------------------------ wiring

    def _outlet(self, channel: str, account: str) -> Outlet | None:
        return self._outlets.get((channel, account))

    def _partner_of_account(self, channel: str, account: str) -> str:
        bound = self.router.for_account(channel, account)
        return bound.id if bound is not None else ""

    def _language_of(self, address: Address) -> str:
        """The language of the partner bound to ``address`` (for a reply that does not carry its own)."""
        partner = self.router.route(address)
        return language_for(partner.languages if partner is not None else ())

    def _with_persona_defaults(self, partner: PartnerConfig) -> PartnerConfig:
        """Fill what the partner leaves to its persona: the mid-turn policy, the greeting and the languages."""
        if partner.mid_turn is not None and partner.greeting and partner.languages:
            return partner
        from personas.loader import load_persona, persona_dirs

        try:
            persona = load_persona(partner.persona, persona_dirs(self.config))
        except ConfigError as error:
            log.error("persona does not load partner=%s error=%s", partner.id, error)
            return partner.model_copy(update={"mid_turn": partner.mid_turn or MidTurn.QUEUE})
        languages = partner.languages or persona.languages
        # The persona's greeting is in the persona's language; a partner speaking another is greeted from
        # the catalogue in its own (greeting.py) rather than in words its learners may not read.
        in_its_words = not persona.languages or language_for(languages) in {catalogued(tag) for tag in persona.languages}
        return partner.model_copy(update={"mid_turn": partner.mid_turn or persona.policies.mid_turn,
                                          "greeting": partner.greeting or (persona.greeting if in_its_words else ""),
                                          "languages": languages})

    def apply(self, config: Config) -> None:
        """Take a new set of partners and bindings live, without restarting a channel (docs/adr/0039).

        ``config`` is the whole validated file (``gateway.configedit``); only its partners and bindings
        are taken -- the data dir, the HTTP listener and the channel accounts are what the gateway was
        started on, and changing those needs a restart.  Turns already running finish with the partner
        they began with; the next message is routed, and answered, by the new one."""
        self.config = self.config.model_copy(update={"partners": config.partners, "bindings": config.bindings})
        # The console-made accounts' bindings live in the store, not the file: they are kept (ADR 0040).
        self.router.replace([self._with_persona_defaults(p) for p in config.partners], self.account_bindings())
        if self.brain is not None:
            self.brain.knowledge.follow(self.config)  # the one brain part that reads partners from the config
        log.info("partners applied partners=%s bindings=%d", ",".join(p.id for p in config.partners), len(config.bindings))

    async def trial_turn(self, partner_id: str, who: str, text: str) -> str:
        """One turn of ``partner_id`` for the console's chat panel, answered here and now; the reply's Markdown.

        The console user talks as the learner ``console:<who>`` on a channel of its own, straight to the
        responder: nothing goes through the inbox or the outbox, no channel account is needed (the partner
        may be bound nowhere yet), and the brain keeps the trial's memory apart from every real learner's.
        KeyError for a partner the gateway does not run."""
        partner = self.router.partner(partner_id)
        if partner is None:
            raise KeyError(partner_id)
        address = Address(channel=ChannelName(TRIAL_CHANNEL), account=AccountId(TRIAL_CHANNEL),
                          conversation=Conversation(chat=ChatId(who), kind=ConversationKind.DIRECT))
        sender = Sender(user=UserId(who), display_name=who)
        message = InboundMessage(event_id=EventId(f"{TRIAL_CHANNEL}:{who}:{uuid.uuid4().hex}"), address=address,
                                 sender=sender, elements=(Text(text=text),), received_at=datetime.now(UTC), addressed=True)
        reply = ""
        async for event in self.responder.respond(Turn(partner, address, sender, TurnRole.LEARNER, [message])):
            if isinstance(event, StreamEnd):
                reply = event.markdown
        return reply

    def _build_brain(self) -> BuiltBrain:
        """The brain, with the services only the gateway can give it: reminders, the teacher desk, the blob store's eraser."""
        from brain.factory import build_brain

        return build_brain(self.config, scheduler=_ReportedReminders(self.reminders, self.teacher), handoff=self.teacher,
                           health=self.model_health, sent_files=self.blob_gc)

    def _count_model_error(self, partner: str, kind: str) -> None:
        self.metrics.model_errors.labels(partner, kind).inc()

    def warm_up(self) -> None:
        """Import the model library in a worker thread when the brain will call a model.

        ``serve`` calls this once it listens: readiness does not wait for the import (seconds of
        CPU), and neither does the first answer, unless it comes sooner, when it waits for this
        same import (``brain.model.load_litellm``).  A failure is logged by ``brain.model.warm``."""
        if not self.own_brain or not self._calls_a_model():
            return
        from brain.model import warm

        self._tasks.append(asyncio.create_task(asyncio.to_thread(warm), name="warm-up"))

    def _calls_a_model(self) -> bool:
        from personas.loader import load_persona, persona_dirs

        for partner in self.config.partners:
            if partner.model is not None:
                return True
            with suppress(ConfigError):
                if load_persona(partner.persona, persona_dirs(self.config)).model is not None:
                    return True
        return False

    def _capabilities(self, channel: str, account: str) -> ChannelCapabilities | None:
        outlet = self._outlets.get((channel, account))
        return outlet.capabilities if outlet else None

    def _authenticates(self, channel: str) -> bool:
        """The channel class's own declaration (a plugged-in channel has no catalog row), else the catalog's."""
        cls = self.channel_classes.get(channel)
        return cls.capabilities().authenticates_senders if cls is not None else authenticates_senders(channel)

    def _policy(self, channel: str, account: str) -> AccessPolicy:
        return self._policies.get((channel, account)) or AccessPolicy()

    def channel(self, name: str, account: str) -> Channel | None:
        return self._channels.get((name, account))

    def running_channels(self) -> dict[tuple[str, str], Channel]:
        return dict(self._channels)

    def serves_websockets(self) -> bool:
        """Whether a running channel serves a websocket route of its own (NapCat's reverse socket), so the
        HTTP server must accept upgrades; asked of the channels, whether their accounts are in the file or the store."""
        return any(channel.serves_websockets() for channel in self._channels.values())

    def _build_channel(self, name: str, account: str, raw: dict[str, Any] | None = None) -> Channel | None:
        """Build a file account's channel, or with ``raw`` a console-made one's (validated by the same model)."""
        try:
            cls = self.channel_classes.get(name) or load_channel(name)
            settings = (validate_account(self.config, name, account, cls.config_model) if raw is None
                        else validate_settings(cls.config_model, raw, where=f"console account {name}/{account}"))
        except (ChannelUnavailable, ConfigError) as error:
            self.unavailable.append(UnavailableChannel(channel=name, account=account, reason=str(error)))
            log.error("channel unavailable platform=%s account=%s reason=%s", name, account, error)
            return None
        if not settings.enabled:
            return None
        caps = cls.capabilities_for(settings)
        health_key = f"{name}:{account}"
        ingest = Ingest(
            name, account, caps, self.store, self.metrics, self.dispatcher.submit,
            on_event=lambda: self.supervisor.note_event(health_key),
            on_undelivered=self._tell_undelivered,
        )
        context = ChannelContext(
            account=AccountId(account),
            config=settings,
            sink=ingest,
            cursors=AccountCursors(self.store, name, account),
            data_dir=self.config.data_dir / "channels" / name / account,
            partner_name=bound.name if (bound := self.router.for_account(name, account)) else None,
            blobs=self.blobs,
        )
        channel = cls(context)
        retry = RetryPolicy(max_attempts=self.config.pipeline.delivery_max_attempts)
        self._outlets[(name, account)] = Outlet(channel, caps, Pacer(caps), retry)
        self._policies[(name, account)] = settings.access
        self._channels[(name, account)] = channel
        return channel

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self._data_lock = datadir.hold_shared(self.config.data_dir)
        await self.store.open()
        try:
            stored = await self._open_stored_accounts()
        except ConfigError:
            await self.store.close()
            datadir.release(self._data_lock)
            self._data_lock = None
            raise
        for name, accounts in self.config.channels.items():
            for account in accounts:
                self._build_channel(name, account)
        for (name, account), raw in stored.items():
            self._build_channel(name, account, raw)
        await self.teacher.load()
        await self._recover()
        self._tasks.append(asyncio.create_task(self.dispatcher.run(), name="dispatcher"))
        self._tasks.append(asyncio.create_task(self._sweep(), name="sweep"))
        self._tasks.append(asyncio.create_task(self.store_watch.run(), name="store-watch"))
        self._disabled = {(s.channel, s.account): _disabled_reason(s.by) for s in await self.store.disabled_accounts()}
        for (name, account), channel in self._channels.items():
            self._supervise(name, account, channel)
        self.ready = True
        log.info("gateway started accounts=%d unavailable=%d responder=%s",
                 len(self._channels), len(self.unavailable), getattr(self.responder, "name", type(self.responder).__name__))

    def _supervise(self, name: str, account: str, channel: Channel) -> None:
        caps = channel.declared
        stall_after = 90.0 if caps.inbound_modes and caps.inbound_modes[0].value in ("poll", "socket") else None
        self.supervisor.start(f"{name}:{account}", channel.run, stall_after=stall_after,
                              stopped=self._disabled.get((name, account)))

    async def _open_stored_accounts(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The console-made accounts' settings, opened with the key; the ones that may run, bound to their partner.

        Without the key, or with one that opens none of them, the gateway does not start (ConfigError: one
        line naming the variable).  One that clashes with a file account of the same name, or whose partner
        left the file, is listed unavailable with the reason and does not run; the file's account does."""
        rows = await self.store.stored_accounts()
        if not rows:
            return {}
        box = SecretBox.from_env()
        if box is None:
            raise ConfigError(f"the store holds {len(rows)} channel account(s) added in the console, sealed with a "
                              f"key, and {KEY_ENV} is not set",
                              fix=f"set {KEY_ENV} to the key they were added with")
        opened: dict[tuple[str, str], dict[str, Any]] = {}
        rotate = bool(os.environ.get(OLD_KEY_ENV, "").strip())
        partners = {p.id for p in self.config.partners}
        for row in rows:
            what = f"the settings of console account {row.channel}/{row.account}"
            raw = unseal(box, row.sealed, what=what)
            self._stored[(row.channel, row.account)] = row
            if rotate:
                await self.store.reseal_stored_account(row.channel, row.account, box.reseal(row.sealed, what=what))
            reason = (f"partners.yaml has an account {row.channel}/{row.account} too; rename that one, or delete this "
                      "one in the console" if row.account in self.config.channels.get(row.channel, {})
                      else f"its partner {row.partner} is no longer in partners.yaml; delete it in the console"
                      if row.partner not in partners else None)
            if reason is not None:
                self.unavailable.append(UnavailableChannel(channel=row.channel, account=row.account, reason=reason))
                log.error("console account not started platform=%s account=%s reason=%s", row.channel, row.account, reason)
                continue
            self._register_secrets(row.channel, raw)
            self.router.bind(Binding(partner=row.partner, channel=row.channel, account=row.account))
            opened[(row.channel, row.account)] = raw
        return opened

    def _register_secrets(self, channel: str, raw: dict[str, Any]) -> None:
        """Hand a console-made account's secrets to the log scrubber before anything may log them."""
        with suppress(ChannelUnavailable, KeyError):
            cls = self.channel_classes.get(channel) or load_channel(channel)
            for value in secrets_of(model_for_kind(cls.config_model, raw.get("kind")), raw):
                register_secret(value, f"{channel} secret (console)")

    async def _recover(self) -> None:
        """Resume what a previous run left: unsent replies first, then unanswered messages."""
        replies, pending = await resume(self.store, self.outbox, self.dispatcher, self.lanes, self._runs)
        if replies or pending:
            log.info("recovered replies=%d pending_messages=%d", replies, pending)

    def _runs(self, channel: str, account: str) -> bool:
        return (channel, account) in self._channels

    async def _sweep(self) -> None:
        since_prune = 0.0
        while True:
            await asyncio.sleep(SWEEP_INTERVAL_S)
            since_prune += SWEEP_INTERVAL_S
            try:
                await self.dispatcher.release_approved()
                await self.fire_reminders()
                await self._refresh_queue_gauges()
                await self.activity.flush()
                ttl = max((p.pairing_ttl_s for p in self._policies.values()), default=3600.0)
                await self.store.drop_expired_holds(ttl)
                if since_prune >= PRUNE_INTERVAL_S:
                    since_prune = 0.0
                    removed = await self.store.prune()
                    log.info("store pruned rows=%d", removed)
                    await self.blob_gc.collect()  # after the prune: files only pruned rows referred to age out
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("housekeeping failed; will try again")

    async def fire_reminders(self) -> int:
        """Turn every due reminder into a reply and wake its delivery (the store marks it fired once)."""
        return await self.outbox.fire_reminders(time.time())

    async def stop(self) -> None:
        self.ready = False

        async def drain() -> None:
            await self.lanes.drain()

        await self.supervisor.stop(drain=drain, timeout=self.config.pipeline.shutdown_drain_s)
        await self.lanes.cancel_all()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        try:
            await self.activity.flush()  # the last counts, before the store closes
        except Exception:
            log.exception("writing the last activity counts failed")
        for channel in self._channels.values():
            try:
                await channel.close()
            except Exception:
                log.exception("channel close failed platform=%s account=%s", channel.name, channel.account)
        if self.brain is not None:
            try:
                await self.brain.close()
            except Exception:
                log.exception("closing the brain failed")
        await self.store.close()
        if self._data_lock is not None:
            datadir.release(self._data_lock)
            self._data_lock = None
        log.info("gateway stopped")

    async def __aenter__(self) -> Gateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------------ operating accounts (the console)

    def _known_account(self, channel: str, account: str) -> str:
        if (channel, account) not in self._channels:
            raise KeyError(f"no running channel account {channel}:{account}")
        return f"{channel}:{account}"

    async def disable_account(self, channel: str, account: str, by: str) -> None:
        """Stop the account and keep it stopped, also across restarts, until :meth:`enable_account`.

        The switch is stored first: a crash between the two leaves it disabled at the next start,
        which is what was asked."""
        unit = self._known_account(channel, account)
        await self.store.set_account_disabled(channel, account, by)
        self._disabled[(channel, account)] = _disabled_reason(by)
        await self.supervisor.halt(unit, _disabled_reason(by))
        log.info("channel account disabled platform=%s account=%s by=%s", channel, account, by)

    async def enable_account(self, channel: str, account: str) -> None:
        """Forget the switch and start the account again."""
        unit = self._known_account(channel, account)
        await self.store.set_account_disabled(channel, account, None)
        self._disabled.pop((channel, account), None)
        await self.supervisor.restart(unit)
        log.info("channel account enabled platform=%s account=%s", channel, account)

    async def restart_account(self, channel: str, account: str) -> bool:
        """Start the account's run again now (a fixed credential, a stuck peer); False when it is disabled."""
        unit = self._known_account(channel, account)
        if (channel, account) in self._disabled:
            return False
        await self.supervisor.restart(unit)
        return True

    # ------------------------------------------------------------------ accounts added in the console (ADR 0040)

    def login_page(self, channel: str, account: str) -> str | None:
        """The page where a person completes the account's login while it waits for one (a QR code)."""
        running = self._channels.get((channel, account))
        return running.login_page() if running is not None else None

    def stored_accounts(self) -> dict[tuple[str, str], StoredAccount]:
        """The console-made accounts (running or not), by channel and account."""
        return dict(self._stored)

    def account_bindings(self) -> tuple[Binding, ...]:
        """The file's bindings and those of the console-made accounts that run (each bound whole to its partner);
        one shadowed by a file account of its name, or whose partner left the file, binds nothing."""
        partners = {p.id for p in self.config.partners}
        made = tuple(Binding(partner=row.partner, channel=row.channel, account=row.account) for row in self._stored.values()
                     if row.partner in partners and row.account not in self.config.channels.get(row.channel, {}))
        return (*self.config.bindings, *made)

    async def add_account(self, channel: str, account: str, partner: str, raw: dict[str, Any], by: str) -> ProbeResult:
        """Validate, probe, seal, store, bind and start a channel account; a failed probe stores nothing.

        :class:`AccountRefused` for a name already taken or no key; ConfigError for settings the channel's
        model refuses (each problem with its field)."""
        if account in self.config.channels.get(channel, {}) or (channel, account) in self._stored:
            raise AccountRefused(f"there is already a {channel} account named {account}: choose another name")
        box = SecretBox.from_env()
        if box is None:
            raise AccountRefused(f"adding accounts needs {KEY_ENV}: {MAKE_ONE}, then restart the gateway", 503)
        result = await self._probe_console_account(self._console_channel(channel), channel, account, raw)
        if not result.ok:
            log.info("console account refused by its probe platform=%s account=%s by=%s", channel, account, by)
            return result
        row = StoredAccount(channel, account, partner, seal(box, raw), by, time.time())
        if not await self.store.add_stored_account(row):
            raise AccountRefused(f"there is already a {channel} account named {account}: choose another name")
        self._stored[(channel, account)] = row
        self.router.bind(Binding(partner=partner, channel=channel, account=account))
        built = self._build_channel(channel, account, raw)
        if built is not None:
            self._supervise(channel, account, built)
        log.info("console account added platform=%s account=%s partner=%s by=%s", channel, account, partner, by)
        return result

    def _console_channel(self, channel: str) -> type[Channel]:
        """The class of a channel an account is being added to or changed in; AccountRefused when not installed."""
        try:
            return self.channel_classes.get(channel) or load_channel(channel)
        except ChannelUnavailable as error:
            raise AccountRefused(str(error), 400) from None

    async def _probe_console_account(self, cls: type[Channel], channel: str, account: str, raw: dict[str, Any]) -> ProbeResult:
        """Validate ``raw`` by the channel's own model and run its probe (its secrets scrubbed from logs first)."""
        from gateway.doctor import probe_settings

        self._register_secrets(channel, raw)
        settings = validate_settings(cls.config_model, raw, where=f"console account {channel}/{account}")
        return await probe_settings(cls, settings, account, self.config.data_dir / "channels" / channel / account)

    def stored_settings(self, channel: str, account: str) -> dict[str, Any]:
        """A console-made account's settings, opened (KeyError: not one; ConfigError: no key or not its key).
        For the console to tell which secrets are set -- it shows that they are, never what they are."""
        box = SecretBox.from_env()
        if box is None:
            raise ConfigError(f"{KEY_ENV} is not set", fix=MAKE_ONE)
        row = self._stored[(channel, account)]
        return unseal(box, row.sealed, what=f"the settings of console account {channel}/{account}")

    async def replace_secrets(self, channel: str, account: str, secrets: dict[str, str], by: str) -> ProbeResult:
        """Probe the account with ``secrets`` in place of its stored ones; only when the probe passes, seal and
        store them and start the account again with them (a disabled one stays stopped).  KeyError: not a
        console-made account; AccountRefused: no key; ConfigError: settings the channel's model refuses."""
        if (channel, account) not in self._stored:
            raise KeyError(f"no console account {channel}/{account}")
        box = SecretBox.from_env()
        if box is None:
            raise AccountRefused(f"replacing secrets needs {KEY_ENV}: {MAKE_ONE}, then restart the gateway", 503)
        cls = self._console_channel(channel)
        row = self._stored[(channel, account)]
        raw = with_secrets(cls.config_model, unseal(box, row.sealed, what=f"the settings of console account {channel}/{account}"),
                           secrets)
        result = await self._probe_console_account(cls, channel, account, raw)
        if not result.ok:
            log.info("console secrets refused by the probe platform=%s account=%s by=%s", channel, account, by)
            return result
        sealed = seal(box, raw)
        await self.store.reseal_stored_account(channel, account, sealed)
        self._stored[(channel, account)] = dataclasses.replace(row, sealed=sealed)
        if account not in self.config.channels.get(channel, {}):  # a clashing row does not run
            old = self._channels.pop((channel, account), None)
            if old is not None:
                await self.supervisor.remove(f"{channel}:{account}")
                try:
                    await old.close()
                except Exception:
                    log.exception("channel close failed platform=%s account=%s", channel, account)
            self.unavailable = [u for u in self.unavailable if (u.channel, u.account) != (channel, account)]
            built = self._build_channel(channel, account, raw)
            if built is not None:
                self._supervise(channel, account, built)
        log.info("console secrets replaced platform=%s account=%s by=%s", channel, account, by)
        return result

    async def remove_account(self, channel: str, account: str, by: str) -> None:
        """Stop a console-made account, close it and forget it (KeyError: no such console-made account)."""
        if (channel, account) not in self._stored:
            raise KeyError(f"no console account {channel}/{account}")
        await self.store.remove_stored_account(channel, account)
        self.unavailable = [u for u in self.unavailable if (u.channel, u.account) != (channel, account)]
        if account not in self.config.channels.get(channel, {}):  # a clashing row never ran: the file's account stays
            built = self._channels.pop((channel, account), None)
            if built is not None:
                await self.supervisor.remove(f"{channel}:{account}")
                try:
                    await built.close()
                except Exception:
                    log.exception("channel close failed platform=%s account=%s", channel, account)
            self._outlets.pop((channel, account), None)
            self._policies.pop((channel, account), None)
            if self._disabled.pop((channel, account), None) is not None:
                await self.store.set_account_disabled(channel, account, None)
            self.router.unbind_account(channel, account)
        del self._stored[(channel, account)]
        log.info("console account removed platform=%s account=%s by=%s", channel, account, by)

    def disabled_reason(self, channel: str, account: str) -> str | None:
        """Why the account is off, while an operator has it disabled (its webhooks and pages answer 503)."""
        return self._disabled.get((channel, account))

    async def disabled_accounts(self) -> dict[tuple[str, str], str]:
        """(channel, account) -> who disabled it."""
        return {(s.channel, s.account): s.by for s in await self.store.disabled_accounts()}

    async def activity_since(self, since: float) -> list[ActivityRow]:
        """The store's hourly sums from ``since`` on, this minute's counts included."""
        await self.activity.flush()
        return await self.store.activity_since(since)

    async def model_use(self, since_day: str) -> list[DayUsage]:
        """The brain's tokens and cost per day and partner; none with a plugged-in responder."""
        return await self.brain.files.usage.by_day(since_day) if self.brain is not None else []

    # ------------------------------------------------------------------ reporting

    async def _refresh_queue_gauges(self) -> QueueDepths:
        depths = await self.store.queue_depths()
        for name, account in self._channels:
            key = f"{name}:{account}"
            self.metrics.queue_depth.labels(name, account, "inbound").set(depths.inbound_pending.get(key, 0))
            self.metrics.queue_depth.labels(name, account, "held").set(depths.inbound_held.get(key, 0))
            self.metrics.queue_depth.labels(name, account, "outbox").set(depths.outbox_open.get(key, 0))
        return depths

    async def status(self) -> StatusReport:
        depths = await self._refresh_queue_gauges()
        health = self.supervisor.health()
        accounts = []
        for name, account in self._channels:
            key = f"{name}:{account}"
            unit = health.get(key)
            tally = self.delivery.undelivered.of(*self._outlets[(name, account)].labels)
            accounts.append(
                AccountStatus(
                    channel=name,
                    account=account,
                    state=unit.state.value if unit else "stopped",
                    reason=(unit.reason or "") if unit else "",
                    since=unit.since if unit else None,
                    restarts=unit.restarts if unit else 0,
                    last_event_at=unit.last_event_at if unit else None,
                    inbound_pending=depths.inbound_pending.get(key, 0),
                    inbound_held=depths.inbound_held.get(key, 0),
                    outbox_open=depths.outbox_open.get(key, 0),
                    undelivered=tally.count,
                    last_undelivered=tally.last_reason,
                )
            )
        return StatusReport(
            version=__version__,
            started_at=self.started_at,
            partners=[p.id for p in self.config.partners],
            accounts=accounts,
            unavailable=self.unavailable,
            responder=getattr(self.responder, "name", type(self.responder).__name__),
            models=[self._model_status(p) for p in self.config.partners],
            http=self.http_load.report(),
            store=StoreStatus.of(self.store.health.condition()),
        )

    # ------------------------------------------------------------------ what the console's learners and knowledge pages read

    @property
    def memory_controls(self) -> GuardedControls | None:
        """The teachers' memory controls of the gateway's own brain (the admin API's); None with a plugged-in responder."""
        return self.brain.memory if self.brain is not None else None

    @property
    def knowledge(self) -> KnowledgeService | None:
        """The brain's knowledge service, the one its turns search; None with a plugged-in responder."""
        return self.brain.knowledge if self.brain is not None else None

    async def usage_today(self, partner: PartnerConfig, person: str) -> UsageToday | None:
        """A learner's tokens today with ``partner`` (the ledger's ``person:<id>`` row), and the persona's budgets."""
        from gateway.console.services import UsageToday

        if self.brain is None:
            return None
        usage = self.brain.files.usage
        policies = self.brain.responder.persona_for(partner.persona).policies
        return UsageToday(tokens=await usage.spent_today(partner.id, f"person:{person}"),
                          budget=policies.daily_token_budget_per_learner,
                          partner_tokens=await usage.spent_today(partner.id),
                          partner_budget=policies.daily_token_budget_per_partner)

    async def _tell_shortfall(self, reply: OutboundReply, reason: str) -> None:
        """A reply went out without some of what it held, or not at all: its partner's teacher hears what and why."""
        await self._tell_teacher(reply.target, f"A reply could not be sent whole: {reason}.")

    async def _tell_undelivered(self, target: Address, reason: str) -> None:
        """The platform took a message for ``target`` and later said it never arrived: told as a refused send is."""
        await self._tell_teacher(target, f"A reply was taken by the platform but never arrived: {reason}.")

    async def _tell_teacher(self, target: Address, report: str) -> None:
        """Not when the message was for a teacher: a report that cannot reach them would report itself again."""
        partner = self.router.route(target)
        chat = target.conversation.chat
        if partner is not None and any(owner.channel == target.channel and (owner.chat or owner.user) == chat
                                       for owner in partner.owners):
            log.warning("not reported: the message was for a teacher platform=%s report=%s", target.channel, report)
            return
        await self.teacher.report(target, report)

    @property
    def store_failure(self) -> str | None:
        """Why the store's writes fail right now (``/healthz`` answers 503 with it), or None."""
        condition = self.store.health.condition()
        return f"store writes fail: {condition.error}" if condition.state is StoreState.FAILING else None

    def _model_status(self, partner: PartnerConfig) -> ModelStatus:
        """The partner's own model (its ``model:``, else its persona's) and how its calls have gone."""
        settings: ModelSettings | None = partner.model
        if settings is None:
            from personas.loader import load_persona, persona_dirs

            try:
                settings = load_persona(partner.persona, persona_dirs(self.config)).model
            except ConfigError as error:
                return ModelStatus(partner=partner.id, state="none", reason=f"its persona does not load: {error}")
        if settings is None:
            return ModelStatus(partner=partner.id, state="none", reason="no model configured: it answers from its notes")
        seen = self.model_health.condition(partner.id)
        return ModelStatus(
            partner=partner.id, model=settings.model, backup=settings.backup.model if settings.backup else "",
            state=seen.state.value, kind=seen.kind, reason=seen.reason, since=seen.since, failures=seen.failures,
        )


if TYPE_CHECKING:  # pragma: no cover - mypy holds the Gateway to what the console is handed (the HTTP app casts)
    def _console_of(gateway: Gateway) -> ConsoleGateway:
        return gateway


def _disabled_reason(by: str) -> str:
    return f"disabled in the console by {by}"


async def serve(config: Config, *, on_ready: Callable[[str], None] | None = None, responder: Responder | None = None,
                on_setup_link: Callable[[str], None] | None = None) -> None:
    """The main job: run the gateway and its HTTP app until SIGINT or SIGTERM, then stop gracefully.

    ``on_setup_link(url)`` is told, once the port listens, the console's one-time link for its first
    administrator when the console has no user yet (:mod:`gateway.console.setup`); it is for a
    terminal, never a log."""
    from gateway.console.setup import first_start_token, setup_link
    from gateway.http.app import build_app
    from gateway.http.server import serve_http
    from gateway.openfiles import raise_open_files_limit

    gateway = Gateway(config, responder=responder)
    gateway.http_load.open_files_limit = raise_open_files_limit(config.http.max_connections)  # before channels open sockets
    await gateway.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)

    setup_token = await first_start_token(gateway.store) if on_setup_link is not None else None

    def listening(url: str) -> None:
        if on_ready is not None:
            on_ready(url)
        if on_setup_link is not None and setup_token is not None:
            on_setup_link(setup_link(config.http.public_url or url, setup_token))
        gateway.warm_up()

    http = asyncio.create_task(
        serve_http(build_app(gateway), config.http.host, config.http.port, on_ready=listening, load=gateway.http_load,
                   websockets=gateway.serves_websockets())
    )
    stopper = asyncio.create_task(stop.wait())
    try:
        done, _ = await asyncio.wait({http, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if http in done:
            http.result()  # surface a bind error
    finally:
        stopper.cancel()
        http.cancel()
        with suppress(asyncio.CancelledError):
            await http
        await gateway.stop()

