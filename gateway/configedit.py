"""Applying one typed change to the gateway's config file, and nothing else (docs/adr/0039).

The console's partner edits live in the file the gateway was started with (``--config``): that
file stays the one source of truth, so what the console did survives a restart, shows in ``git
diff``, and a teacher editing the file by hand and one clicking in the console edit the same thing.
:meth:`ConfigEditor.apply`:

1. reads the file and refuses the change when its bytes are not the version the page was shown
   (:class:`StaleFile`, answered 409) -- someone edited it since;
2. applies the change to the *round-trip* tree (ruamel.yaml), so every comment, the key order and
   the quoting of everything the change does not touch are kept;
3. validates the whole resulting text with :func:`gateway.configfile.config_from_text` -- the
   function ``serve`` loads the file with -- and loads every partner's persona as ``serve``'s
   start check does, so the console reports exactly the :class:`ConfigError` the file would get
   and never writes a file the gateway could not start with;
4. writes it atomically (:func:`gateway.atomicfile.write_atomic`) and returns the new config, which
   the caller hands the running gateway (``Gateway.apply``).

A gateway running without a file (the embedded default) has nowhere to keep an edit:
:class:`NoConfigFile`.  Edits are serialised by one lock, so two console requests never interleave.
"""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from gateway.atomicfile import version, write_atomic
from gateway.configfile import DEFAULT_CONFIG_NAME, config_from_text
from gateway.core.config import Binding, Config, OwnerRef, Secrets, ToolRule
from gateway.core.errors import ConfigError, GatewayError
from gateway.yamlfile import decode_utf8, parse_yaml

# ---------------------------------------------------------------------------- the changes


class ModelFields(BaseModel):
    """The model settings the console edits; the others a file may hold (``backup``, costs, the connect and
    first-token deadlines) are kept as they are.  ``api_key`` is a reference, ``env:NAME``, never a key."""

    model_config = ConfigDict(extra="forbid")
    model: str = Field(min_length=1)
    api_base: str | None = None
    api_key: str | None = Field(default=None, pattern=r"^env:[A-Za-z_][A-Za-z0-9_]*$")
    temperature: float | None = None
    max_tokens: int | None = None
    timeout_s: float | None = None


class PartnerFields(BaseModel):
    """One partner as the console's form and JSON API set it; every other key of its entry in the file is kept."""

    model_config = ConfigDict(extra="forbid")
    id: str
    name: str
    persona: str = "study-buddy"
    greeting: str = ""
    model: ModelFields | None = None
    """None: the partner takes its persona's model."""
    tool_rules: list[ToolRule] = []
    owners: list[OwnerRef] | None = None
    """None keeps the owners the file lists (only an administrator may change them)."""


@dataclass(frozen=True)
class SavePartner:
    """Create the partner (``new``: an id already there is refused) or replace its console-edited fields."""

    fields: PartnerFields
    new: bool


@dataclass(frozen=True)
class DeletePartner:
    partner: str


@dataclass(frozen=True)
class AddBinding:
    """Route an account -- or one chat or thread of it -- to a partner; a place some binding routes already is refused."""

    binding: Binding


@dataclass(frozen=True)
class RemoveBinding:
    """Drop the file's binding equal to this one."""

    binding: Binding


Change = SavePartner | DeletePartner | AddBinding | RemoveBinding


class NoConfigFile(GatewayError):
    """The gateway runs on its embedded default config: there is no file to keep an edit in."""


class StaleFile(GatewayError):
    """The file changed since the page that sent the edit was shown."""


class NoSuchPartner(GatewayError):
    pass


class PlaceTaken(GatewayError):
    """A binding routes that very place (account, chat, thread) already: two would leave the answer to the file's order."""


class NoSuchBinding(GatewayError):
    """The binding to remove is not in the file (removed by hand, or made with a console account)."""


# ---------------------------------------------------------------------------- the editor

MODEL_KEYS = tuple(ModelFields.model_fields)


@dataclass(frozen=True)
class Snapshot:
    text: str
    version: str


class ConfigEditor:
    """Edits one config file; ``path`` None (the embedded default) refuses every edit."""

    def __init__(self, path: Path | None, secrets: Secrets = Secrets.RESOLVE) -> None:
        self.path, self.secrets = path, secrets
        self._lock = asyncio.Lock()

    def snapshot(self) -> Snapshot:
        if self.path is None:
            raise NoConfigFile("this gateway runs on its embedded default config; start it with --config FILE to edit partners")
        try:
            data = self.path.read_bytes()
        except OSError as error:  # moved or made unreadable since the gateway started
            raise ConfigError(f"cannot be read: {error.strerror or error}", file=str(self.path),
                              fix="put the file back where the gateway was started with it") from None
        return Snapshot(decode_utf8(data, self.path), version(data))

    async def apply(self, change: Change, expected_version: str) -> Config:
        """Apply ``change`` if the file is still at ``expected_version``; the validated new config."""
        async with self._lock:
            current = self.snapshot()
            if current.version != expected_version:
                raise StaleFile("the config file changed since this page was loaded; reload it and make the change again")
            assert self.path is not None  # snapshot() refused otherwise
            parse_yaml(current.text, self.path)  # a file broken by hand is named with its line, as serve names it
            yaml, tree = _load(current.text)
            _change(tree, change)
            text = _dump(yaml, tree)
            config = config_from_text(text, self.path, secrets=self.secrets)
            _check_personas(config)
            try:
                write_atomic(self.path, text.encode("utf-8"))
            except OSError as error:
                raise unwritable(self.path, error) from None
            return config


def unwritable(path: Path, error: OSError) -> ConfigError:
    """A file the gateway may read but not replace (a read-only deployment): the OS's reason, the old file intact."""
    return ConfigError(f"cannot be written: {error.strerror or error}", file=str(path),
                       fix="let the gateway's user write this file and its folder, or make the change by hand")


def fields_in(text: str, partner_id: str) -> PartnerFields | None:
    """The console's fields of one partner as the file spells them (``api_key: env:NAME``, not its value).

    Read from the text, not from the loaded config, because a loaded secret no longer says which variable
    it came from; keys the console does not edit (``mid_turn``, ``languages``) are left to the file.
    ConfigError for a file that does not parse (by the project's one YAML reader, aliases refused)."""
    raw = parse_yaml(text, Path(DEFAULT_CONFIG_NAME)) or {}
    entries = raw.get("partners") if isinstance(raw, dict) else None
    entry = next((e for e in entries or [] if isinstance(e, dict) and e.get("id") == partner_id), None)
    if entry is None:
        return None
    model = entry.get("model")
    if isinstance(model, str):
        model = {"model": model}
    shown = {key: entry[key] for key in ("id", "name", "persona", "greeting", "tool_rules", "owners") if key in entry}
    if isinstance(model, dict):
        shown["model"] = {key: model[key] for key in MODEL_KEYS if key in model}
    return PartnerFields.model_validate(shown)


def _check_personas(config: Config) -> None:
    """``serve`` does not start with a partner whose persona does not load: neither is such a file written."""
    from personas.loader import load_partner_personas

    load_partner_personas(config)


def _load(text: str) -> tuple[YAML, CommentedMap]:
    """The round-trip tree and a dumper that writes the file's unchanged parts back as they were.

    ruamel keeps comments and order but not a file's indentation style, so the style that
    reproduces the file unchanged is chosen (``partners init`` writes ``  - id:``)."""
    chosen: YAML | None = None
    for mapping, sequence, offset in ((2, 4, 2), (2, 2, 0), (4, 4, 2), (4, 6, 4)):
        yaml = YAML(typ="rt")
        yaml.preserve_quotes = True
        yaml.width = 4096
        yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
        tree = yaml.load(text)
        if chosen is None:
            chosen = yaml
        if _dump(yaml, tree) == text:
            chosen = yaml
            break
    assert chosen is not None
    tree = chosen.load(text)
    if tree is None:
        tree = CommentedMap()
    if not isinstance(tree, CommentedMap):
        raise ConfigError("the file must hold a mapping of settings", fix="start from `partners init`")
    return chosen, tree


def _dump(yaml: YAML, tree: Any) -> str:
    out = io.StringIO()
    yaml.dump(tree, out)
    return out.getvalue()


def _list(tree: CommentedMap, key: str, spelled: str) -> CommentedSeq:
    """The file's top-level list ``key`` (made when absent); ConfigError when the file holds something else there."""
    found = tree.get(key)
    if found is None:
        found = tree[key] = CommentedSeq()
    if not isinstance(found, CommentedSeq):
        raise ConfigError(f"{key} must be a list", field=key, fix=f"write each entry as `- {spelled}: ...`")
    return found


def _partners(tree: CommentedMap) -> CommentedSeq:
    return _list(tree, "partners", "id")


def _index(partners: CommentedSeq, partner_id: str) -> int | None:
    return next((i for i, entry in enumerate(partners) if isinstance(entry, dict) and entry.get("id") == partner_id), None)


def _bindings(tree: CommentedMap) -> CommentedSeq:
    return _list(tree, "bindings", "partner")


def _binding_of(entry: Any) -> Binding | None:
    try:
        return Binding.model_validate(dict(entry)) if isinstance(entry, dict) else None
    except ValueError:
        return None  # left for the validation of the whole file to name


def _where(binding: Binding) -> tuple[str, str, str | None, str | None]:
    return binding.channel, binding.account, binding.chat, binding.thread


def _change_binding(tree: CommentedMap, change: AddBinding | RemoveBinding) -> None:
    bindings = _bindings(tree)
    wanted = change.binding
    if isinstance(change, RemoveBinding):
        index = next((i for i, entry in enumerate(bindings) if _binding_of(entry) == wanted), None)
        if index is None:
            raise NoSuchBinding("that binding is not in the config file")
        del bindings[index]
        return
    taken = next((found for found in map(_binding_of, bindings) if found is not None and _where(found) == _where(wanted)), None)
    if taken is not None:
        raise PlaceTaken(f"partner {taken.partner!r} answers there already; remove that binding first, or bind one chat"
                         " of the account instead")
    spelled = wanted.model_dump(mode="json", exclude_defaults=True, exclude={"partner"})  # as a person writes it
    bindings.append(CommentedMap({"partner": wanted.partner, **spelled}))


def _change(tree: CommentedMap, change: Change) -> None:
    if isinstance(change, AddBinding | RemoveBinding):
        _change_binding(tree, change)
        return
    partners = _partners(tree)
    if isinstance(change, DeletePartner):
        index = _index(partners, change.partner)
        if index is None:
            raise NoSuchPartner(f"no partner {change.partner!r} in the file")
        del partners[index]
        return
    fields = change.fields
    index = _index(partners, fields.id)
    if change.new:
        if index is not None:
            raise ConfigError(f"a partner with id {fields.id!r} exists already", field="id", fix="choose another id")
        partners.append(CommentedMap())
        index = len(partners) - 1
    elif index is None:
        raise NoSuchPartner(f"no partner {fields.id!r} in the file")
    _set_partner(partners[index], fields)


def _put(entry: CommentedMap, key: str, value: Any, default: Any) -> None:
    """Set ``key``, or drop it when ``value`` is its default and the file did not spell it out."""
    if value == default and (key not in entry or value is None or value == ""):
        entry.pop(key, None)
    elif entry.get(key) != value:
        entry[key] = value


def _set_partner(entry: CommentedMap, fields: PartnerFields) -> None:
    entry["id"] = fields.id
    entry["name"] = fields.name
    _put(entry, "persona", fields.persona, "study-buddy")
    _put(entry, "greeting", fields.greeting, "")
    _set_model(entry, fields.model)
    rules = [rule.model_dump(mode="json", exclude_none=True) for rule in fields.tool_rules]
    if _plain(entry.get("tool_rules", [])) != rules:  # unchanged rules keep their comments
        _put(entry, "tool_rules", [CommentedMap({k: _flow(v) for k, v in rule.items()}) for rule in rules], [])
    if fields.owners is not None:
        _set_owners(entry, fields.owners)


def _set_model(entry: CommentedMap, model: ModelFields | None) -> None:
    if model is None:
        entry.pop("model", None)
        return
    wanted = model.model_dump(exclude_none=True)
    kept = entry.get("model")
    if set(wanted) == {"model"} and not isinstance(kept, dict):
        entry["model"] = wanted["model"]  # the shorthand, `model: provider/name`
        return
    mapping = kept if isinstance(kept, CommentedMap) else CommentedMap()
    for key in MODEL_KEYS:
        if key in wanted:
            if mapping.get(key) != wanted[key]:
                mapping[key] = wanted[key]
        else:
            mapping.pop(key, None)
    entry["model"] = mapping


def _set_owners(entry: CommentedMap, owners: list[OwnerRef]) -> None:
    """The owners given, each keeping the file's own entry (with its ``account`` and ``chat``) when it was there."""
    before = {(o.get("channel"), str(o.get("user"))): o for o in entry.get("owners") or [] if isinstance(o, dict)}
    listed = [before.get((o.channel, o.user)) or CommentedMap(o.model_dump(exclude_defaults=True)) for o in owners]
    if _plain(entry.get("owners", [])) != _plain(listed):
        _put(entry, "owners", CommentedSeq(listed), [])


def _flow(value: Any) -> Any:
    """A list of names written on one line, ``remove: [a, b]``, as people write them."""
    if not isinstance(value, list):
        return value
    seq = CommentedSeq(value)
    seq.fa.set_flow_style()
    return seq


def _plain(value: Any) -> Any:
    """A round-trip node as plain lists and dicts, to compare it with what the form sent."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
