"""The configuration's models: what a valid ``partners.yaml`` is, as typed objects.

Unknown fields are rejected, secrets are read from the environment
(``env:NAME``) and never printed.  Code receives these typed objects, never
dicts.  Reading the file, turning pydantic's errors into a teacher's words and
validating an account's channel settings is the application's job
(:mod:`gateway.configfile`): this module is part of the vocabulary and imports
nothing else of the project but the vocabulary.

Every secret a model resolves is told to the listeners of
:func:`on_secret_resolved` -- the application's log scrubber
(``gateway.redaction``) listens, so no log line can show it; the vocabulary
declares the event and does not know who masks the value.

Channel-specific settings of an account are validated by that channel's own
model (``Channel.config_model``) when the channel is loaded, so reading the
config never imports a platform SDK.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from gateway.core.capabilities import authenticates_senders, platform_catalog
from gateway.core.errors import ConfigError

SecretListener = Callable[[SecretStr | str, str], None]
"""Called with each secret value a model resolves and a label for it (the field, the variable)."""

_listeners: list[SecretListener] = []


def on_secret_resolved(listener: SecretListener) -> None:
    """Tell ``listener`` every secret resolved from now on (the log scrubber registers itself here)."""
    if listener not in _listeners:
        _listeners.append(listener)


def _resolved(value: SecretStr | str, label: str) -> None:
    for listener in _listeners:
        listener(value, label)


def secret_read(value: SecretStr | str, label: str) -> None:
    """Register a secret a model read from somewhere other than ``env:`` (a credentials file such as a zuliprc),
    so no log line, status page or CLI output can show it either."""
    _resolved(value, label)


class Secrets(str, Enum):
    """How ``env:NAME`` secrets are treated while a config loads (passed as pydantic's validation context)."""

    RESOLVE = "resolve"
    """Read every secret now; an unset variable is a configuration error (``serve``, ``chat``, ``doctor``)."""
    DEFER = "defer"
    """An unset variable becomes an :class:`UnsetSecret` that fails only when used (read-only commands)."""


class UnsetSecret(SecretStr):
    """A secret whose environment variable is not set, in a config loaded with :attr:`Secrets.DEFER`.

    ``partners status`` or ``partners people list`` read the config for its data dir and
    address and never use the model's key, so they must not need it; anything that does
    use the secret gets the same error ``serve`` would have stopped with.
    """

    def __init__(self, variable: str) -> None:
        super().__init__("")
        self.variable = variable

    def get_secret_value(self) -> str:
        raise ConfigError(
            f"environment variable {self.variable} is not set",
            fix=f"export {self.variable}=... in the gateway's environment before starting it",
        )

    def __str__(self) -> str:
        return f"env:{self.variable} (not set)"

    def __repr__(self) -> str:
        return f"UnsetSecret({self.variable!r})"


def _secret_from_env(value: Any, info: ValidationInfo) -> Any:
    """Resolve ``env:NAME``; every secret resolved is registered, so no log line can show it (see on_secret_resolved)."""
    if isinstance(value, UnsetSecret) or value is None:
        return value
    if isinstance(value, SecretStr):
        _resolved(value, info.field_name or "secret")
        return value
    if isinstance(value, str) and value.startswith("env:"):
        name = value[4:]
        if name in os.environ:
            _resolved(os.environ[name], f"{info.field_name or 'secret'} (env:{name})")
            return SecretStr(os.environ[name])
        if info.context is Secrets.DEFER:
            return UnsetSecret(name)
        raise PydanticCustomError("env_unset", "environment variable {variable} is not set", {"variable": name})
    raise PydanticCustomError(
        "secret_literal", "secrets are read from the environment: write env:VARIABLE_NAME here, not the secret itself"
    )


EnvSecret = Annotated[SecretStr, BeforeValidator(_secret_from_env)]
"""A secret given as ``env:NAME`` in the file and resolved from the environment."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- access policy


class DmPolicy(str, Enum):
    OPEN = "open"
    ALLOWLIST = "allowlist"
    PAIRING = "pairing"
    DISABLED = "disabled"


class GroupPolicy(str, Enum):
    MENTION = "mention"  # only when the bot is mentioned (or replied to, or given a command)
    REPLY = "reply"  # only replies to the bot's own messages
    KEYWORD = "keyword"  # when the text starts with or contains one of ``keywords``
    ALWAYS = "always"
    OFF = "off"


class RefusalNotice(_Model):
    """What a refused sender sees: a short notice at most every ``min_interval_s``, or nothing."""

    notify: bool = True
    text: str = ""
    """The teacher's own words, sent as written; empty sends the catalogue's refusal in the partner's language."""
    min_interval_s: float = 3600.0


class GroupSettings(_Model):
    policy: GroupPolicy | None = None
    keywords: tuple[str, ...] | None = None
    enabled: bool = True
    remove_tools: tuple[str, ...] = ()
    """Tools this group takes away from the partner (subtraction only)."""


class ToolRule(_Model):
    """Takes tools away when a turn's context matches every match field given; unset fields match anything.

    There is deliberately no way to *add* a tool: a partner's enabled set is the
    ceiling, and context can only narrow it.  A rule without match fields applies
    to every turn of the partner.
    """

    remove: tuple[str, ...] = Field(min_length=1)
    channel: str | None = None
    kind: Literal["direct", "group"] | None = None
    role: Literal["owner", "learner", "stranger"] | None = None
    group: str | None = None
    """A group's chat id as the platform spells it; matches group conversations only."""

    @model_validator(mode="after")
    def _group_means_group(self) -> ToolRule:
        if self.group is not None and self.kind == "direct":
            raise ValueError("a rule naming a group matches only group conversations; remove `kind: direct`")
        return self

    def describe(self) -> str:
        """The match fields in words, for removal reasons: ``channel telegram, role stranger``."""
        parts = []
        if self.channel is not None:
            parts.append(f"channel {self.channel}")
        if self.kind is not None:
            parts.append(self.kind)
        if self.role is not None:
            parts.append(f"role {self.role}")
        if self.group is not None:
            parts.append(f"group {self.group}")
        return ", ".join(parts) or "every conversation"


class AccessPolicy(_Model):
    dm: DmPolicy = DmPolicy.PAIRING
    allow_from: tuple[str, ...] = ()
    """Sender ids allowed in direct messages (``allowlist`` policy); ``*`` allows everyone."""
    group: GroupPolicy = GroupPolicy.MENTION
    keywords: tuple[str, ...] = ()
    groups: dict[str, GroupSettings] = Field(default_factory=dict)
    """Per-group overrides, keyed by the platform's chat id."""
    refusal: RefusalNotice = RefusalNotice()
    pairing_ttl_s: float = 3600.0
    pairing_max_pending: int = 3


class AccountConfig(BaseModel):
    """Settings every channel account has; a channel's own model extends this."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = True
    access: AccessPolicy = AccessPolicy()


# --------------------------------------------------------------------------- partners and routing


class MidTurn(str, Enum):
    """What happens to a message that arrives while the partner is answering."""

    QUEUE = "queue"  # answered by the next turn
    MERGE = "merge"  # joins the running turn at its next round boundary


class ModelSettings(_Model):
    """Which model a partner uses, set per partner or persona; any provider litellm supports.

    ``model: openai/gpt-4o-mini`` is short for ``model: {model: openai/gpt-4o-mini}``, wherever a
    model is set: a partner, a persona, a ``backup``.  The three deadlines bound how long a learner
    can wait on one call (``docs/adr/0013``): a model that misses one is retried once, then its
    ``backup`` is asked, then the partner answers from its notes.
    """

    model: str = Field(min_length=1, description="litellm model name, e.g. openai/gpt-4o-mini or ollama/llama3")
    api_base: str | None = None
    api_key: EnvSecret | None = None
    backup: ModelSettings | None = None
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    """Seconds to open the connection: a server that is not there fails this fast."""
    first_token_timeout_s: float = Field(default=15.0, gt=0)
    """Seconds from asking to the first piece of the answer, and the longest silence between two pieces
    after it.  Raise it for a local model that loads slowly or one that thinks silently before it speaks.
    (A model that cannot stream sends its whole answer at once: only ``timeout_s`` bounds it.)"""
    timeout_s: float = Field(default=120.0, gt=0)
    """Seconds for the whole answer, however steadily it streams."""
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        """One rule for every place a model is set: a bare name is the model with every default."""
        return {"model": value} if isinstance(value, str) else value


class OwnerRef(_Model):
    """A teacher's identity on one channel (the partner's owner), and where to reach them."""

    channel: str
    user: str
    account: str = "default"
    """Which account of that channel the teacher talks to the partner through."""
    chat: str | None = None
    """The teacher's direct chat with the bot, when it is not the user id (Matrix DM rooms, email)."""


class PartnerConfig(_Model):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    name: str
    persona: str = "study-buddy"
    greeting: str = ""
    owners: tuple[OwnerRef, ...] = ()
    mid_turn: MidTurn | None = None
    """None takes the persona's policy (``policies.mid_turn``)."""
    model: ModelSettings | None = None
    """Overrides the persona's model for this partner (several partners may share a persona)."""
    languages: tuple[str, ...] = ()
    """The languages the partner speaks, first the main one; empty takes the persona's ``languages``.
    They choose the language of the gateway's own notices (:func:`gateway.core.phrases.language_for`)."""
    tool_rules: tuple[ToolRule, ...] = ()
    """Context rules that take tools away from this partner's set; they never add one."""

    def owned_by(self, teacher: str) -> bool:
        """Whether ``teacher`` (one of a teacher's accounts, ``CHANNEL:USER``) is among this partner's owners."""
        return any(f"{owner.channel}:{owner.user}" == teacher for owner in self.owners)


class Binding(_Model):
    """Routes a channel account -- or one group or conversation of it -- to a partner.

    The most specific binding wins: conversation (chat + thread) > chat > account.
    """

    partner: str
    channel: str
    account: str = "default"
    chat: str | None = None
    thread: str | None = None


def teacher_account(value: str) -> str:
    """``value`` if it names a teacher's account as partner owners do, ``CHANNEL:USER``; else ValueError with the fix.

    Admin tokens and console users (``partners console add-user --teacher``) name their teacher this way."""
    channel, _, user = value.partition(":")
    if not channel or not user or any(c.isspace() for c in value):
        raise ValueError(f"{value!r} is not CHANNEL:USER; write the teacher's account as in owners, e.g. telegram:12345")
    return value


class AdminToken(_Model):
    """A teacher's token for the JSON API (``/api/v1``): it reaches only the partners that teacher owns.

    ``teacher`` is one of the teacher's accounts as ``CHANNEL:USER`` -- any entry of a partner's
    ``owners`` (a teacher lists their accounts there, one per channel).
    """

    token: EnvSecret
    teacher: str
    """The teacher's account, ``CHANNEL:USER`` (``telegram:12345``)."""
    partners: tuple[str, ...] = ()
    """Narrows the token to these of the teacher's partners; empty: every partner the teacher owns."""

    @field_validator("teacher")
    @classmethod
    def _channel_and_user(cls, value: str) -> str:
        return teacher_account(value)

    def owns(self, partner: PartnerConfig) -> bool:
        return partner.owned_by(self.teacher)

    def covers(self, partner: PartnerConfig) -> bool:
        return self.owns(partner) and (not self.partners or partner.id in self.partners)


class HttpConfig(_Model):
    host: str = "127.0.0.1"
    port: int = Field(default=8780, ge=0, le=65535)
    public_url: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    """Host names the gateway answers besides loopback, ``host`` and ``public_url``'s host (``*.example.org``
    for sub-domains); any other Host header is refused, which stops DNS rebinding (docs/security)."""
    admin_token: EnvSecret | None = None
    """The operator's token for the JSON API (``/api/v1``): it reaches every partner's learners."""
    admin_tokens: tuple[AdminToken, ...] = ()
    """Teachers' tokens, each reaching only its teacher's partners (``docs/operation.md``)."""
    max_connections: int = Field(default=1000, ge=1, le=1_000_000)
    """Open connections held at once; a request on a connection beyond them is answered 503."""
    max_streams: int = Field(default=500, ge=1)
    """Event streams (the web chat's SSE) open at once, from everyone; more are answered 503."""
    max_streams_per_address: int = Field(default=100, ge=1)
    """Event streams open at once from one client address (behind a proxy: its X-Forwarded-For); more get 429."""
    header_timeout_s: float = Field(default=10.0, gt=0, le=600)
    """A connection that has not sent a whole request line and headers within this is closed."""

    @model_validator(mode="after")
    def _check_limits(self) -> HttpConfig:
        if self.max_streams > self.max_connections:
            raise ValueError(f"max_streams ({self.max_streams}) must not exceed max_connections "
                             f"({self.max_connections}): every stream holds a connection")
        if self.max_streams_per_address > self.max_streams:
            raise ValueError(f"max_streams_per_address ({self.max_streams_per_address}) must not exceed "
                             f"max_streams ({self.max_streams})")
        return self

    @model_validator(mode="after")
    def _tokens_differ(self) -> HttpConfig:
        values = [t for t in (self.admin_token, *(entry.token for entry in self.admin_tokens)) if t is not None]
        known = [t.get_secret_value() for t in values if not isinstance(t, UnsetSecret)]
        if len(set(known)) < len(known):
            raise ValueError("two admin tokens hold the same value: give each teacher (and the operator) their own")
        return self


class PipelineConfig(_Model):
    coalesce_window_s: float = Field(default=0.6, ge=0)
    """Wait this long after a message for more from the same sender before answering."""
    coalesce_max_s: float = Field(default=3.0, ge=0)
    """Never delay a turn more than this, however fast messages keep coming."""
    delivery_max_attempts: int = Field(default=8, ge=1)
    shutdown_drain_s: float = Field(default=10.0, ge=0)
    media_fetch_timeout_s: float = Field(default=60.0, gt=0)
    """How long fetching one inbound file may take before the turn goes ahead with a note instead."""
    blob_retention_s: float = Field(default=30 * 24 * 3600.0, gt=0)
    """How long an inbound file is kept after it was last stored, once every message that carries it is
    answered (``gateway.blob_gc``).  30 days by default: long past any turn that may still read it (one re-run
    after an outage), short enough that learners' files do not pile up on the gateway's disk."""


def lease_timings_problem(lease_s: float, renew_every_s: float, fence_margin_s: float) -> str | None:
    """Why these lease timings could let two nodes run one account at once, or None when they cannot.

    One rule for the ``fleet:`` section and for :class:`gateway.fleet.keeper.LeaseKeeper`, which refuses
    the same timings when built by other code: a node must stop trusting its lease before it expires
    (the fence margin inside the lease), and renew it before it stops trusting it."""
    if not 0 < fence_margin_s < lease_s:
        return "fence_margin_s must be more than 0 and less than lease_s"
    if renew_every_s >= lease_s - fence_margin_s:
        return "renew_every_s must be well inside the lease: less than lease_s - fence_margin_s"
    return None


class FleetConfig(_Model):
    """How a node of a fleet holds its leases (ADR 0051), for when ``partners serve`` takes them
    (not yet: issue 16; until then one node per database, docs/deploy.md).

    The defaults take a dead node's accounts within ~12 s: the lease runs out after ``lease_s`` and a
    free one is looked for every ``look_every_s``.  A node that could not renew for ``lease_s -
    fence_margin_s`` stops the account's work itself, before the lease can pass to another node."""

    node: str = ""
    """This node's name in the lease rows and ``/status``; empty lets the node name itself."""
    lease_s: float = Field(default=10.0, gt=0)
    renew_every_s: float = Field(default=3.0, gt=0)
    look_every_s: float = Field(default=2.0, gt=0)
    fence_margin_s: float = Field(default=2.0, gt=0)
    poll_s: float = Field(default=1.0, gt=0)
    """How often a node looks for pending work of the accounts it holds besides being woken by
    ``NOTIFY`` (a notification sent while no one listened is lost; the poll is what cannot be)."""

    @model_validator(mode="after")
    def _check_timings(self) -> FleetConfig:
        problem = lease_timings_problem(self.lease_s, self.renew_every_s, self.fence_margin_s)
        if problem is not None:
            raise ValueError(problem)
        return self


STORE_SCHEMES = ("postgresql://", "postgres://")


def check_store_dsn(dsn: str) -> str:
    """A ``store:`` DSN as the config accepts it: PostgreSQL's URL form, and no password in it.

    Why refuse a password: the config file is read, shown and copied (``partners config show``, the console's
    editor, support bundles); a password belongs in the environment, where libpq reads ``PGPASSWORD``.
    The errors never repeat the DSN, so a refused password is not echoed either."""
    from urllib.parse import parse_qs, urlsplit

    dsn = dsn.strip()
    if not dsn.startswith(STORE_SCHEMES):
        raise ValueError("must be a PostgreSQL URL, postgresql://user@host:port/database (unset: SQLite in data_dir)")
    try:
        parts = urlsplit(dsn)
        port = parts.port
    except ValueError:
        raise ValueError("is not a valid PostgreSQL URL; write postgresql://user@host:port/database") from None
    if parts.password is not None or "password" in parse_qs(parts.query):
        raise ValueError("holds a password; remove it from the file and set PGPASSWORD in the gateway's environment")
    if not parts.hostname and "host" not in parse_qs(parts.query):
        raise ValueError("names no host; write postgresql://user@host:port/database")
    if port == 0:
        raise ValueError("has port 0; write postgresql://user@host:port/database")
    return dsn


class Config(_Model):
    data_dir: Path = Path("partners-data")
    http: HttpConfig = HttpConfig()
    pipeline: PipelineConfig = PipelineConfig()
    partners: tuple[PartnerConfig, ...] = ()
    bindings: tuple[Binding, ...] = ()
    channels: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    """channel name -> account id -> that account's settings (validated by the channel's model)."""
    source: Path | None = Field(default=None, exclude=True)
    fleet: FleetConfig = FleetConfig()
    """The fleet's lease timings and this node's name; only a PostgreSQL ``store:`` runs as a fleet."""
    store: str | None = None
    """Where the gateway's state lives: unset, ``gateway.db`` (SQLite) in ``data_dir``; ``postgresql://user@host/db``,
    a PostgreSQL database a fleet of nodes shares (issue 16).  Its password comes from the environment
    (``PGPASSWORD``, which the PostgreSQL client reads), never from this file."""
    _secrets: Secrets = PrivateAttr(default=Secrets.RESOLVE)

    @field_validator("store")
    @classmethod
    def _check_store(cls, value: str | None) -> str | None:
        return None if value is None else check_store_dsn(value)

    @model_validator(mode="after")
    def _check_references(self) -> Config:
        ids = [p.id for p in self.partners]
        dupes = {i for i in ids if ids.count(i) > 1}
        if dupes:
            raise ValueError(f"partner ids must be unique; repeated: {', '.join(sorted(dupes))}")
        for i, binding in enumerate(self.bindings):
            if binding.partner not in ids:
                raise ValueError(f"bindings.{i}.partner: no partner with id {binding.partner!r} (known: {', '.join(ids) or 'none'})")
        for i, partner in enumerate(self.partners):
            for j, owner in enumerate(partner.owners):
                if owner.channel in platform_catalog() and not authenticates_senders(owner.channel):
                    raise ValueError(
                        f"partners.{i}.owners.{j}.channel: {owner.channel} does not prove who its senders are, so anyone "
                        f"could claim to be this owner there; name the teacher on a channel they sign in to (telegram, matrix, console)"
                    )
        for i, entry in enumerate(self.http.admin_tokens):  # a token reaches only partners its teacher owns
            mine = [p.id for p in self.partners if entry.owns(p)]
            if not mine:
                raise ValueError(f"http.admin_tokens.{i}.teacher: {entry.teacher} owns no partner; "
                                 "name an account listed under a partner's owners")
            strays = [partner for partner in entry.partners if partner not in mine]
            if strays:
                raise ValueError(f"http.admin_tokens.{i}.partners: {entry.teacher} does not own {', '.join(strays)} "
                                 f"(their partners: {', '.join(mine)})")
        return self

    @property
    def secrets(self) -> Secrets:
        """How this config was loaded; files read on its behalf (personas) treat their secrets the same way."""
        return self._secrets

    @property
    def database_path(self) -> Path:
        return self.data_dir / "gateway.db"

    def partner(self, partner_id: str) -> PartnerConfig:
        for partner in self.partners:
            if partner.id == partner_id:
                return partner
        raise KeyError(partner_id)

    def account_settings(self, channel: str, account: str) -> AccountConfig:
        """The common part of an account's settings (channel-specific fields are ignored here)."""
        raw = self.channels.get(channel, {}).get(account, {})
        common = {k: v for k, v in raw.items() if k in AccountConfig.model_fields}
        return AccountConfig.model_validate(common)
