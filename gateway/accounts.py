"""Channel accounts added in the console: their form, read from the channel's own model, and their sealed settings.

A console-made account is validated by exactly the model ``partners.yaml``'s accounts are
(``Channel.config_model``, the kind's own model for a platform with kinds), so an account is
valid in the console when it would be valid in the file.  Only one thing differs: in the file a
secret is ``env:NAME``, here it is the value the teacher pasted.  It is handed to the model as a
``SecretStr``, which the config's secret validator accepts as given and registers with the log
scrubber, so no log line can show it from then on.

The form's fields come from the model too (:func:`form_fields`): one input per setting of a plain
type -- text, number, a choice of a ``Literal`` or an ``Enum``, a checkbox -- and a password input for each secret.
Settings of richer types (the access policy, command menus) keep their defaults here; an account
that needs them is written in the file instead.  The settings are stored as one JSON object sealed
by :mod:`gateway.secretbox`; nothing here touches the store.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Union

from pydantic import BaseModel, SecretStr, ValidationError

from gateway.core.config import AccountConfig, DmPolicy
from gateway.core.errors import ConfigError
from gateway.secretbox import SecretBox
from gateway.validation import problems

LEFT_OUT = frozenset({"enabled", "access", "kind"})
"""Settings the form never shows as they are: on and off are the channels page's switches, a kind is chosen
by the form itself, and of the access policy only who may write directly (:data:`DIRECT`) is asked."""
DIRECT = "dm"
"""The one access setting the form asks (``access.dm``): pairing by default, answered on the pairing page."""
ACCOUNT_NAME = r"^[a-z0-9][a-z0-9_-]{0,63}$"
"""What an account added in the console may be called: it appears in URLs and webhook paths."""


class InputKind(str, Enum):
    TEXT = "text"
    SECRET = "password"
    NUMBER = "number"
    CHECKBOX = "checkbox"
    CHOICE = "choice"


@dataclass(frozen=True)
class FormField:
    """One input of an account's form, as the channel's settings model declares it."""

    name: str
    kind: InputKind
    required: bool
    default: str
    """The default as the input shows it ('' for none and for secrets)."""
    choices: tuple[str, ...] = ()
    within: str = ""
    """The setting it is nested in, for a platform whose kinds are a tagged union (WeCom's ``mode``); '' at the top."""


class AccountRefused(Exception):
    """An account the console cannot add or remove, in words for the teacher (a clash, no key, a file account)."""

    def __init__(self, reason: str, status: int = 409) -> None:
        super().__init__(reason)
        self.reason, self.status = reason, status


def _plain(annotation: Any) -> Any:
    """The annotation without ``| None`` and without ``Annotated``'s validators (``EnvSecret | None`` -> SecretStr)."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        kept = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        annotation = kept[0] if len(kept) == 1 else annotation
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _kind_of(annotation: Any) -> tuple[InputKind, tuple[str, ...]] | None:
    plain = _plain(annotation)
    if isinstance(plain, type) and issubclass(plain, SecretStr):
        return InputKind.SECRET, ()
    if typing.get_origin(plain) is Literal:
        return InputKind.CHOICE, tuple(str(arg) for arg in typing.get_args(plain))
    if isinstance(plain, type) and issubclass(plain, Enum):  # a choice named in the model (email's imap_security)
        return InputKind.CHOICE, tuple(str(member.value) for member in plain)
    if plain is bool:
        return InputKind.CHECKBOX, ()
    if plain in (int, float):
        return InputKind.NUMBER, ()
    if plain is str:
        return InputKind.TEXT, ()
    return None


def form_fields(model: type[BaseModel]) -> list[FormField]:
    """The inputs of ``model``'s form, required ones first, in the model's order otherwise."""
    found = []
    for name, info in model.model_fields.items():
        kind = _kind_of(info.annotation)
        if name in LEFT_OUT or kind is None:
            continue
        shown = info.default.value if isinstance(info.default, Enum) else info.default
        default = "" if info.is_required() or kind[0] is InputKind.SECRET or shown is None else str(shown)
        if kind[0] is InputKind.CHECKBOX:
            default = "on" if info.default is True else ""
        found.append(FormField(name, kind[0], info.is_required(), default, kind[1]))
    found.append(FormField(DIRECT, InputKind.CHOICE, False, DmPolicy.PAIRING.value, tuple(p.value for p in DmPolicy)))
    return sorted(found, key=lambda field: not field.required)


def secret_names(model: type[BaseModel]) -> frozenset[str]:
    return frozenset(f.name for f in form_fields(model) if f.kind is InputKind.SECRET)


def tagged_union(model: type[BaseModel]) -> tuple[str, dict[str, type[BaseModel]]] | None:
    """The setting holding a union of models tagged by a ``Literal`` ``kind`` (WeCom's ``mode``), and its members
    by kind; None for a model without one (its kinds, if any, are subclasses: :func:`model_for_kind`)."""
    for name, info in model.model_fields.items():
        plain = _plain(info.annotation)
        if typing.get_origin(plain) not in (Union, types.UnionType):
            continue
        members: dict[str, type[BaseModel]] = {}
        for member in typing.get_args(plain):
            tag = member.model_fields.get("kind") if isinstance(member, type) and issubclass(member, BaseModel) else None
            if tag is None or typing.get_origin(tag.annotation) is not Literal:
                break
            members[str(typing.get_args(tag.annotation)[0])] = member
        else:
            return name, members
    return None


def account_fields(model: type[AccountConfig], kind: str | None) -> list[FormField]:
    """The inputs of one kind of account: the kind's subclass's, or the top-level settings and, nested
    (``within``), those of the kind's member of a tagged union."""
    union = tagged_union(model)
    if union is None or kind is None:
        return form_fields(model_for_kind(model, kind))
    name, members = union
    inner = [dataclasses.replace(f, within=name) for f in form_fields(members[kind]) if f.name != DIRECT]
    return sorted([*inner, *form_fields(model)], key=lambda field: not field.required)


def _secret_places(model: type[AccountConfig], raw: Mapping[str, Any]) -> list[tuple[str, frozenset[str]]]:
    """Where ``raw`` keeps secrets: ('', the top level's names), and (the nested setting, its member's names)."""
    try:
        places = [("", secret_names(model_for_kind(model, raw.get("kind"))))]
    except KeyError:  # a kind the model does not have: its own validation says so
        places = [("", frozenset())]
    union = tagged_union(model)
    nested = raw.get(union[0]) if union else None
    if union is not None and isinstance(nested, Mapping) and (member := union[1].get(str(nested.get("kind")))):
        places.append((union[0], secret_names(member)))
    return places


def secret_settings(model: type[AccountConfig], raw: Mapping[str, Any]) -> dict[str, Any]:
    """Every secret setting of ``raw`` by name, at the top or nested, with its value (None when not set)."""
    found: dict[str, Any] = {}
    for within, names in _secret_places(model, raw):
        holder = raw.get(within) if within else raw
        found.update({name: holder.get(name) if isinstance(holder, Mapping) else None for name in names})
    return found


def with_secrets(model: type[AccountConfig], raw: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:
    """``raw`` with each of ``secrets`` put where its setting lives (nested ones in their nested setting)."""
    merged = {**raw}
    for within, names in _secret_places(model, raw):
        given = {name: value for name, value in secrets.items() if name in names}
        if within:
            merged[within] = {**merged[within], **given}
        else:
            merged.update(given)
    return merged


def with_kind(model: type[AccountConfig], raw: Mapping[str, Any], kind: str | None) -> dict[str, Any]:
    """``raw`` naming ``kind`` where the model reads it (the guide's kind wins over one the caller sent)."""
    if kind is None:
        return dict(raw)
    union = tagged_union(model)
    if union is None:
        return {**raw, "kind": kind}
    nested = raw.get(union[0])
    return {**raw, union[0]: {**(nested if isinstance(nested, Mapping) else {}), "kind": kind}}


def kind_of(model: type[AccountConfig], raw: Mapping[str, Any]) -> str | None:
    """The kind ``raw`` names, at the top or in its tagged union's setting; None when it names none."""
    union = tagged_union(model)
    nested = raw.get(union[0]) if union else None
    kind = nested.get("kind") if isinstance(nested, Mapping) else raw.get("kind")
    return str(kind) if kind is not None else None


def secrets_of(model: type[AccountConfig], raw: Mapping[str, Any]) -> list[str]:
    """The secret values in ``raw`` (to register with the log scrubber before anything may log them)."""
    return [str(value) for value in secret_settings(model, raw).values() if value]


def model_for_kind(model: type[AccountConfig], kind: Any) -> type[AccountConfig]:
    """The settings model of one kind of account (``IlinkConfig`` for personal WeChat), else ``model`` itself.

    A platform with kinds dispatches from its one ``config_model`` to the kind's subclass, which names
    itself in ``KIND``; the form shows that subclass's settings."""
    if kind is None or getattr(model, "KIND", None) == kind:
        return model
    for sub in model.__subclasses__():
        if getattr(sub, "KIND", None) == kind:
            return sub
    raise KeyError(f"{model.__name__} has no kind {kind!r}")


def settings_from_form(fields: list[FormField], form: Mapping[str, str], *, kind: str | None = None) -> dict[str, Any]:
    """The settings a submitted form gives: each filled input (as text: the model converts it), each checkbox
    that differs from its default; an empty input keeps the model's default.  The kind goes where the model
    reads it: at the top, or in the nested setting of a tagged union (WeCom's ``mode``)."""
    nests = {field.within for field in fields if field.within}
    raw: dict[str, Any] = {nest: {"kind": kind} for nest in nests} if nests else {"kind": kind} if kind else {}
    for field in fields:
        holder = raw[field.within] if field.within else raw
        if field.kind is InputKind.CHECKBOX:
            ticked = form.get(field.name) == "on"
            if ticked != (field.default == "on"):
                holder[field.name] = ticked
            continue
        value = form.get(field.name, "").strip()
        if field.name == DIRECT:
            if value and value != field.default:
                raw["access"] = {"dm": value}
        elif value:
            holder[field.name] = value
    return raw


def validate_settings(model: type[AccountConfig], raw: Mapping[str, Any], *, where: str) -> AccountConfig:
    """``raw`` validated by the channel's model, its secrets given as they are; a :class:`ConfigError` lists
    every problem with its field (``where`` names the account), never a secret's value."""
    given: dict[str, Any] = dict(raw)
    for within, names in _secret_places(model, raw):
        holder = dict(raw[within]) if within else given
        holder.update({name: SecretStr(str(holder[name])) for name in names if holder.get(name) is not None})
        if within:
            given[within] = holder
    try:
        return model.model_validate(given)
    except ValidationError as error:
        raise ConfigError.of(problems(error, model, raw=dict(raw)), file=where) from None


def seal(box: SecretBox, raw: Mapping[str, Any]) -> bytes:
    return box.seal(json.dumps(dict(raw), sort_keys=True).encode("utf-8"))


def unseal(box: SecretBox, sealed: bytes, *, what: str) -> dict[str, Any]:
    """The settings a sealed row holds; ConfigError when the key does not open it."""
    opened = json.loads(box.open(sealed, what=what).decode("utf-8"))
    if not isinstance(opened, dict):  # pragma: no cover - only seal() writes these
        raise ConfigError(f"{what} holds no settings", fix="delete the account in the console and add it again")
    return opened
