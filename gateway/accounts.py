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


def secrets_of(model: type[AccountConfig], raw: Mapping[str, Any]) -> list[str]:
    """The secret values in ``raw`` (to register with the log scrubber before anything may log them)."""
    names = secret_names(model_for_kind(model, raw.get("kind")))
    return [str(raw[name]) for name in names if raw.get(name)]


def model_for_kind(model: type[AccountConfig], kind: Any) -> type[AccountConfig]:
    """The settings model of one kind of account (``IlinkConfig`` for personal WeChat), else ``model`` itself.

    A platform with kinds dispatches from its one ``config_model`` to the kind's subclass, which names
    itself in ``KIND``; the form shows that subclass's settings."""
    if kind is None:
        return model
    for sub in model.__subclasses__():
        if getattr(sub, "KIND", None) == kind:
            return sub
    raise KeyError(f"{model.__name__} has no kind {kind!r}")


def settings_from_form(fields: list[FormField], form: Mapping[str, str], *, kind: str | None = None) -> dict[str, Any]:
    """The settings a submitted form gives: each filled input (as text: the model converts it), each checkbox
    that differs from its default; an empty input keeps the model's default."""
    raw: dict[str, Any] = {"kind": kind} if kind else {}
    for field in fields:
        if field.kind is InputKind.CHECKBOX:
            ticked = form.get(field.name) == "on"
            if ticked != (field.default == "on"):
                raw[field.name] = ticked
            continue
        value = form.get(field.name, "").strip()
        if field.name == DIRECT:
            if value and value != field.default:
                raw["access"] = {"dm": value}
        elif value:
            raw[field.name] = value
    return raw


def validate_settings(model: type[AccountConfig], raw: Mapping[str, Any], *, where: str) -> AccountConfig:
    """``raw`` validated by the channel's model, its secrets given as they are; a :class:`ConfigError` lists
    every problem with its field (``where`` names the account), never a secret's value."""
    try:
        secrets = secret_names(model_for_kind(model, raw.get("kind")))
    except KeyError:  # a kind the model does not have: its own validation says so
        secrets = frozenset()
    given = {name: (SecretStr(str(value)) if name in secrets and value is not None else value)
             for name, value in raw.items()}
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
