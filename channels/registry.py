"""Which channels exist, which can run here, and why the others cannot.

Listing never imports a platform SDK: built-in channels are described by
``channels/platforms.toml`` and checked with ``importlib.util.find_spec``;
third-party channels come from the ``partners.channels`` entry-point group
and are imported only when configured.  An unavailable channel is reported
with the reason and the fix, never hidden.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points

from channels.base import Channel
from gateway.core.capabilities import ChannelCapabilities, EditMode, GroupAddressing, PlatformEntry, platform_catalog
from gateway.core.errors import ChannelUnavailable
from gateway.extras import install_command

ENTRY_POINT_GROUP = "partners.channels"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChannelListing:
    name: str
    title: str
    available: bool
    reason: str = ""
    source: str = "built-in"
    features: tuple[str, ...] = ()
    """What a learner gets there, in a few words (:func:`features_of`); empty for a plugin not loaded yet."""
    kind: str = ""
    """The kind of account the row describes, on a platform with several (``official_account``); else empty."""

    @property
    def label(self) -> str:
        """The channel as the listing names it: ``weixin (official_account)`` for a kind's row."""
        return f"{self.name} ({self.kind})" if self.kind else self.name


STREAMING = {EditMode.EDIT: "edits in place", EditMode.NATIVE_STREAM: "streams"}
GROUPS = {GroupAddressing.MENTION: "groups by mention", GroupAddressing.ALWAYS: "groups, every message",
          GroupAddressing.DIRECT_ONLY: "one-to-one only"}


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:g} h" if seconds % 3600 == 0 else f"{seconds / 60:g} min"


def features_of(caps: ChannelCapabilities) -> tuple[str, ...]:
    """The declared capabilities a teacher chooses a channel by, as short words for ``partners channels``.

    A reply window and a cap on replies per message are named too: they decide whether a partner can
    answer late, or remind a learner at all (a WeChat Official Account: 48 h, 5 per message)."""
    found = [STREAMING.get(caps.edit_mode, ""), GROUPS.get(caps.group_addressing, ""),
             "threads" if caps.threads else "", "reactions" if caps.reactions else "", "typing" if caps.typing else "",
             ("files: " + "/".join(sorted(caps.media_kinds))) if caps.media_kinds else "",
             f"replies within {_duration(caps.reply_window_s)}" if caps.reply_window_s else "",
             f"{caps.replies_per_inbound} replies per message" if caps.replies_per_inbound else ""]
    return tuple(word for word in found if word)


def _rows(entry: PlatformEntry, available: bool, reason: str = "") -> list[ChannelListing]:
    """The platform's row, and one more for each other kind of account it has (ADR 0033); a kind whose
    own requirement is missing (``kind_requires``) is unavailable on its row alone."""
    default = entry.default_kind or ""
    listed = [(default if entry.kinds else "", entry.capabilities), *entry.kinds.items()]
    rows = []
    for kind, caps in listed:
        own = _kind_reason(entry, kind or default) if available else None
        rows.append(ChannelListing(entry.name, entry.title, available and own is None, own or reason,
                                   features=features_of(caps), kind=kind))
    return rows


def _missing_requirement(entry: PlatformEntry, kind: str | None = None) -> str | None:
    """The first import name ``entry`` needs that is not installed (for ``kind``: its own ones too)."""
    for module in (*entry.requires, *(entry.kind_requires.get(kind, ()) if kind else ())):
        if importlib.util.find_spec(module) is None:
            return module
    return None


def _kind_reason(entry: PlatformEntry, kind: str) -> str | None:
    missing = _missing_requirement(entry, kind)
    if missing is None:
        return None
    how = f"needs the `{entry.extra}` extra: {_install_hint(entry)}" if entry.extra else _install_hint(entry)
    return f"a {kind} account {how} (the Python package providing `{missing}` is not installed)"


def kind_unavailable(name: str, kind: str) -> str | None:
    """Why an account of ``kind`` on built-in channel ``name`` cannot run here (a missing extra that only
    that kind needs, with the command that installs it), or None when it can.

    The channel asks before it first touches what that kind needs, so the teacher reads the command,
    not an ``ImportError``."""
    entry = platform_catalog().get(name)
    return None if entry is None else _kind_reason(entry, kind)


def _install_hint(entry: PlatformEntry) -> str:
    """How to install what ``entry`` requires: its extra's command, or, for a catalog row that names no extra, its packages."""
    if entry.extra is None:
        return f"install the Python package(s) providing {', '.join(entry.requires)}"
    return install_command(entry.extra)


@cache
def _plugin_points() -> dict[str, object]:
    """Installed plugin channels; scanned once per process (a scan costs milliseconds)."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def list_channels() -> list[ChannelListing]:
    listings: list[ChannelListing] = []
    for entry in platform_catalog().values():
        if not entry.implemented:
            listings += _rows(entry, False, "not implemented in this release yet")
            continue
        missing = _missing_requirement(entry)
        if missing:
            reason = f"needs the `{entry.extra}` extra: {_install_hint(entry)}" if entry.extra else _install_hint(entry)
            listings += _rows(entry, False, reason)
        else:
            listings += _rows(entry, True)
    for name, point in _plugin_points().items():
        if name in platform_catalog():
            continue
        listings.append(ChannelListing(name, name, True, source=f"plugin {getattr(point, 'value', '')}"))
    return listings


def load_channel(name: str) -> type[Channel]:
    """Import and return a channel class, or raise ChannelUnavailable saying why."""
    catalog = platform_catalog()
    if name in catalog:
        entry = catalog[name]
        if not entry.implemented:
            raise ChannelUnavailable(f"channel {name!r} is not implemented in this release yet")
        missing = _missing_requirement(entry)
        if missing:
            raise ChannelUnavailable(
                f"channel {name!r} needs the Python package providing `{missing}`: "
                f"{_install_hint(entry)}"
            )
        module_name, _, attr = entry.module.partition(":")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except ImportError as error:
            raise ChannelUnavailable(f"channel {name!r} failed to import: {error}") from error
        return cls
    points = _plugin_points()
    if name in points:
        try:
            cls = points[name].load()  # type: ignore[attr-defined]
        except Exception as error:  # a broken plugin must be reported, not crash the gateway
            raise ChannelUnavailable(f"plugin channel {name!r} failed to load: {error}") from error
        if not (isinstance(cls, type) and issubclass(cls, Channel)):
            raise ChannelUnavailable(f"plugin channel {name!r} does not name a Channel subclass")
        return cls
    known = ", ".join(sorted([*catalog, *points]))
    raise ChannelUnavailable(f"no channel named {name!r} (known: {known})")
