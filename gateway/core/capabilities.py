"""What a channel can do, declared as data.

Each platform's numbers (text limits and the unit they are counted in, send
rates, reply windows, edit intervals) live in one place:
``channels/platforms.toml``.  A channel class points at its entry; the
outbound path reads the declaration to split, pace, stream and degrade --
channels never retry, split or decide policy themselves.

The declarations are data, not code: this module reads the file by its path in
the source tree (:data:`PLATFORMS_FILE`, or a path handed to
:func:`platform_catalog`) and never imports ``channels`` -- the vocabulary stays
a leaf, and listing what a platform can do loads no channel and no SDK.

Rows are validated when the catalog loads: closed sets are enums, numbers
have their ranges, contradictory facts are refused with the platform's name.
Every field has a reader outside this module (``tests/test_capabilities_read.py``).
"""

from __future__ import annotations

import tomllib
from enum import Enum
from functools import cache
from pathlib import Path
from typing import get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gateway.core.errors import ConfigError
from gateway.core.messages import ELEMENT_KINDS, MediaKind

PLATFORMS_FILE = Path(__file__).resolve().parents[2] / "channels" / "platforms.toml"
"""The declarations beside the channels they describe (gateway/core/ -> the source root -> channels/)."""


class TextUnit(str, Enum):
    """How a platform counts the length of a message."""

    CHARS = "chars"  # Unicode code points
    UTF16 = "utf16"  # UTF-16 code units (Telegram, Discord)
    BYTES = "bytes"  # UTF-8 bytes (WeCom, Zulip, Matrix, Feishu)
    RUNES = "runes"  # Go runes == code points (Mattermost); kept distinct to mirror the docs


class Dialect(str, Enum):
    """The markup a platform renders; the renderer for each lives in ``gateway.render``."""

    PLAIN = "plain"
    MARKDOWN = "markdown"  # CommonMark-ish (Discord, Mattermost, Zulip, Teams, Mochat, DingTalk, Feishu md)
    TELEGRAM_HTML = "telegram_html"
    HTML = "html"  # Matrix formatted_body, email text/html, webchat
    SLACK_MRKDWN = "slack_mrkdwn"
    WHATSAPP = "whatsapp"


class EditMode(str, Enum):
    """How a reply is shown while it is written (docs/adr/0025-the-outbound-contract.md)."""

    NONE = "none"  # the final text only
    EDIT = "edit"  # edit a sent message in place
    NATIVE_STREAM = "native_stream"  # a platform streaming primitive


class Proactive(str, Enum):
    """Whether the bot may write first (a reminder, a teacher's report) rather than only answer."""

    ALLOWED = "allowed"  # any time, within the reply window where the platform declares one
    NONE = "none"  # only replies to a message (QQ's official API since 2025-04-21)
    TEMPLATE = "template"  # outside the reply window only a template the platform approved (WhatsApp; the channel picks it)


class GroupAddressing(str, Enum):
    """When a group message counts as said to the bot, by what the platform lets it see."""

    MENTION = "mention"  # a mention of the bot, a reply to it, a command
    ALWAYS = "always"  # the bot sees every group message and each one is for it
    DIRECT_ONLY = "direct_only"  # the platform has no group chats for bots (WhatsApp Cloud, email)


class InboundMode(str, Enum):
    POLL = "poll"
    WEBHOOK = "webhook"
    SOCKET = "socket"
    LOCAL = "local"  # served by the gateway itself (webchat, console)


class SendRate(BaseModel):
    """A token bucket: ``rate`` sends per ``per`` seconds with room for ``burst``."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    rate: float = Field(gt=0)
    per: float = Field(default=1.0, gt=0)
    burst: int = Field(default=1, ge=1)


class ChannelCapabilities(BaseModel):
    """One frozen declaration per platform; the single home of its facts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    platform: str
    text_limit: int = Field(gt=0)
    text_unit: TextUnit
    payload_max_bytes: int | None = Field(default=None, gt=0)
    """The whole message on the wire, envelope included, where the platform caps that besides the text
    (a Matrix event: 65,536 bytes); the channel keeps its encoding under it."""
    line_length: int | None = Field(default=None, gt=0)
    """The longest line the wire format should carry (email: 78, RFC 5322); None: lines are not limited."""
    dialect: Dialect
    elements: frozenset[str] = Field(description="element kinds the platform shows natively")
    edit_mode: EditMode = EditMode.NONE
    min_edit_interval: float = Field(default=1.0, ge=0)
    typing: bool = False
    typing_interval: float = Field(default=5.0, gt=0)
    threads: bool = False
    reactions: bool = False
    media_kinds: frozenset[str] = frozenset()
    media_max_bytes: int = Field(default=0, ge=0)
    media_with_text: bool = False
    """Files travel inside the text message (email's MIME parts) rather than as messages of their own."""
    media_fetch_max_bytes: int | None = Field(default=None, gt=0)
    """The largest inbound file the platform hands out, where it differs from ``media_max_bytes`` (the
    Telegram cloud Bot API sends up to 50 MB but serves only 20 MB through getFile)."""
    reply_window_s: float | None = Field(default=None, gt=0)
    """How long after the inbound message a reply may be sent (None: no window)."""
    group_reply_window_s: float | None = Field(default=None, gt=0)
    """A narrower window for group conversations (QQ: 5 min against 60); both are enforced by
    ``gateway.pipeline.windows``, the only place that computes a window."""
    replies_per_inbound: int | None = Field(default=None, ge=1)
    """How many messages the platform takes in answer to one inbound message (QQ 5); a reply that would
    take more is merged to fit, and what still does not fit is recorded (``gateway.pipeline.budget``)."""
    proactive: Proactive = Proactive.ALLOWED
    """Whether a message that answers nothing (a reminder, a teacher's report) may be sent at all."""
    send_rate_chat: SendRate | None = None
    send_rate_group: SendRate | None = None
    send_rate_global: SendRate | None = None
    inbound_modes: tuple[InboundMode, ...] = (InboundMode.POLL,)
    ack_deadline_s: float | None = Field(default=None, gt=0)
    """How soon a webhook or stream frame must be answered before the platform retries it (Slack 3 s)."""
    signature_window_s: float | None = Field(default=None, gt=0)
    """How far a signed webhook's timestamp may be from now (Slack's 5 minutes); older is refused as stale."""
    reply_token_lifetime_s: float | None = Field(default=None, gt=0)
    """How long a token that answers one inbound event stays usable (Discord's interaction token: 15 min).
    The channel answers through it while it lives and by an ordinary message afterwards, so it is the
    channel's to read, not a window that closes the reply (that is ``reply_window_s``)."""
    passive_reply_s: float | None = Field(default=None, gt=0)
    """How long a webhook may wait for the answer to carry it in its own HTTP response (a WeChat Official
    Account's passive reply, inside its 5 s); past that the answer goes as an ordinary message.  The
    channel reads it; None: answers never ride in the webhook's response."""
    redelivery_horizon_s: float = Field(default=7 * 24 * 3600.0, gt=0)
    """How long the platform may redeliver an event; dedup keys are kept at least this long."""
    group_addressing: GroupAddressing = GroupAddressing.MENTION
    """Which group messages the platform shows the bot; ``partners doctor`` warns on settings it cannot honour."""
    authenticates_senders: bool = False
    """True when the platform proves who sent a message (a signed-in account), so a sender id can be
    trusted as a person.  Only such channels may carry a partner's owners: on any other channel
    anyone can claim any id (web chat's browser-made session, email's From line)."""
    idempotent_sends: bool = False
    """The platform recognises a repeated send by its idempotency key (Matrix's txnId).  When it
    does not, the outbound path lets one send per account be unrecorded at a time, so a crash can
    repeat at most that one (docs/adr/0022-one-unrecorded-send-per-account.md)."""

    @model_validator(mode="after")
    def _consistent(self) -> ChannelCapabilities:
        """Facts that contradict each other are refused when the catalog loads, not found at a send."""
        unknown = self.elements - set(ELEMENT_KINDS)
        if unknown:
            raise ValueError(f"elements: unknown kinds {sorted(unknown)} (known: {', '.join(ELEMENT_KINDS)})")
        not_media = self.media_kinds - set(get_args(MediaKind))
        if not_media:
            raise ValueError(f"media_kinds: {sorted(not_media)} are not media kinds ({', '.join(get_args(MediaKind))})")
        if self.media_kinds and not self.media_max_bytes:
            raise ValueError("media_max_bytes: a platform that carries media_kinds needs its size limit")
        if self.passive_reply_s is not None and (self.ack_deadline_s is None or self.passive_reply_s >= self.ack_deadline_s):
            raise ValueError("passive_reply_s: the wait for a passive reply must end before ack_deadline_s")
        if self.group_reply_window_s is not None and self.reply_window_s is None:
            raise ValueError("group_reply_window_s: a group window narrows reply_window_s, which is not declared")
        return self


class PlatformEntry(BaseModel):
    """A catalog row: where a channel lives and what it needs, without importing it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    title: str
    module: str
    extra: str | None = None
    requires: tuple[str, ...] = ()
    """Import names that must be importable (checked with importlib.util.find_spec, not imported)."""
    kind_requires: dict[str, tuple[str, ...]] = {}
    """Import names one kind of account needs besides ``requires`` (WeCom's AI bot needs its SDK, its
    self-built app does not): the channel loads without them, and only an account of that kind is refused."""
    implemented: bool = True
    capabilities: ChannelCapabilities
    """The platform's facts for its default kind of account."""
    kinds: dict[str, ChannelCapabilities] = {}
    """Other kinds of account on the same platform whose facts differ (``[weixin.kinds.official_account]``):
    one channel, one config key, a row of facts per kind (docs/adr/0033-capabilities-per-account-kind.md)."""
    default_kind: str | None = None
    """The ``kind`` whose facts ``capabilities`` are -- an account that names no kind is one -- for a platform
    with ``kinds``; ``partners channels`` names it on the platform's row."""


@cache
def platform_catalog(path: Path = PLATFORMS_FILE) -> dict[str, PlatformEntry]:
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    catalog: dict[str, PlatformEntry] = {}
    for name, entry in raw.items():
        caps = dict(entry.pop("capabilities", {}))
        caps["platform"] = name
        kinds = {kind: {**row, "platform": name} for kind, row in dict(entry.pop("kinds", {})).items()}
        try:
            catalog[name] = PlatformEntry(name=name, capabilities=ChannelCapabilities(**caps),
                                          kinds={kind: ChannelCapabilities(**row) for kind, row in kinds.items()}, **entry)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'capabilities'}: {e['msg']}" for e in error.errors())
            raise ConfigError(f"platform {name!r} is declared wrongly: {problems}", file=str(path), field=name,
                              fix="correct the row in channels/platforms.toml; its comments name each number's source") from None
    return catalog


def capabilities_of(platform: str, kind: str | None = None) -> ChannelCapabilities:
    """``platform``'s declared facts; for an account ``kind`` with a row of its own, that row's."""
    entry = platform_catalog()[platform]
    if kind is None or kind not in entry.kinds:
        return entry.capabilities
    return entry.kinds[kind]


def fetch_limit(capabilities: ChannelCapabilities) -> int:
    """The most bytes of one inbound file the pipeline fetches from this platform."""
    return capabilities.media_fetch_max_bytes or capabilities.media_max_bytes


def authenticates_senders(platform: str) -> bool:
    """Whether ``platform`` proves who its senders are; a platform the catalog does not know does not."""
    entry = platform_catalog().get(platform)
    return entry is not None and entry.capabilities.authenticates_senders
