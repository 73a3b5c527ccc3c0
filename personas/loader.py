"""Persona folders: a teacher's voice, tools, knowledge and policies, read and validated.

A persona is a folder named after it::

    study-buddy/
      persona.yaml    name, description, greeting, languages, model, tools, knowledge, policies
      SOUL.md         the voice, teaching style and boundaries (the system prompt's heart)
      notes/          optional Markdown study notes the partner can search

Folders are looked up by name in the user's folders first (``<config dir>/personas/``)
and then in the packaged ``personas/`` folder, so a teacher overrides a shipped
persona by copying its folder next to the config.  Every problem becomes a
:class:`~gateway.core.errors.ConfigError` naming the file, the field and the fix.
A persona reads only its own files, each under its size cap (:mod:`personas.files`).
Loaded personas are cached until the folder, ``persona.yaml`` or ``SOUL.md`` changes.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Sequence
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gateway.core.config import Config, MidTurn, ModelSettings, Secrets, ToolRule
from gateway.core.errors import ConfigError
from gateway.yamlfile import parse_yaml, read_yaml
from personas.files import MAX_SOUL_BYTES, confined, note_files, read_capped, too_large

PACKAGED_DIR = Path(__file__).resolve().parent
"""The shipped personas; always searched last."""
SPEC_FILE = "persona.yaml"
SOUL_FILE = "SOUL.md"
SOUL_FIX = "keep the voice, style and boundaries short; put reference material in notes/, which the partner searches"
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AnswerStyle(str, Enum):
    CHAT = "chat"  # short turns, streamed; several messages are fine
    SINGLE_MESSAGE = "single_message"  # one complete, well-structured message (email)


class Policies(_Model):
    mid_turn: MidTurn = MidTurn.QUEUE
    max_rounds: int = Field(default=6, ge=1)
    """Model calls the brain may make for one turn (each tool round is one)."""
    settle_rounds: int = Field(default=2, ge=0)
    """Rounds after ``max_rounds`` in which the model is told to wrap up; one tool-less round follows."""
    daily_token_budget_per_learner: int | None = Field(default=None, ge=1)
    """Tokens one learner may use per day; None is unlimited."""
    daily_token_budget_per_partner: int | None = Field(default=None, ge=1)
    """Tokens all learners of one partner may use per day together; None is unlimited."""
    answer_style: AnswerStyle = AnswerStyle.CHAT


LanguageTag = Annotated[str, Field(pattern=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$")]
"""A BCP-47 tag: en, es, fr, pt-BR, zh-Hans."""
ToolName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")]


class Persona(_Model):
    """One persona: everything in ``persona.yaml``, plus its id, folder and soul."""

    id: str
    """The folder's name."""
    folder: Path
    name: str = Field(min_length=1)
    description: str = ""
    greeting: str = ""
    languages: tuple[LanguageTag, ...] = ("en",)
    model: ModelSettings | None = None
    """None: no language model configured (partners answer from notes); ``model: NAME`` is short for
    ``model: {model: NAME}`` (a rule of ``ModelSettings`` itself, shared with partners and backups)."""
    tools: tuple[ToolName, ...] = ()
    forced_tools: tuple[ToolName, ...] = ()
    """Enabled whether or not ``tools`` lists them, and never taken away by a tool rule."""
    tool_rules: tuple[ToolRule, ...] = ()
    """Context rules that take tools away (``remove: [...]`` plus channel, kind, role, group); never add."""
    knowledge: tuple[str, ...] = ()
    """Files or folders of notes, relative to the persona folder (``notes/``)."""
    policies: Policies = Policies()
    soul: str = Field(min_length=1)
    """SOUL.md: voice, teaching style and boundaries."""

    @field_validator("tools", "forced_tools")
    @classmethod
    def _unique(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"listed more than once: {', '.join(repeated)}")
        return names

    @field_validator("knowledge")
    @classmethod
    def _inside_folder(cls, sources: tuple[str, ...]) -> tuple[str, ...]:
        for source in sources:
            path = PurePosixPath(source.replace("\\", "/"))
            if not source.strip() or path.is_absolute() or ".." in path.parts:
                raise ValueError(f"{source!r} must be a path inside the persona folder, like notes/")
        return sources

    @property
    def enabled_tools(self) -> tuple[str, ...]:
        """``tools`` then any forced tool not already listed."""
        return self.tools + tuple(t for t in self.forced_tools if t not in self.tools)

    def knowledge_paths(self) -> list[Path]:
        return [self.folder / source for source in self.knowledge]


# --------------------------------------------------------------------------- finding folders


def persona_dirs(config: Config) -> list[Path]:
    """The user's persona folder for this config: ``personas/`` next to the file (or the working dir)."""
    base = config.source.parent if config.source is not None else Path.cwd()
    return [(base / "personas").resolve()]


def _search_order(search: Sequence[Path]) -> list[Path]:
    order: list[Path] = []
    for folder in [*search, PACKAGED_DIR]:
        folder = Path(folder).expanduser().resolve()
        if folder not in order:
            order.append(folder)
    return order


def list_personas(search: Sequence[Path] = ()) -> dict[str, Path]:
    """Persona name -> the folder that wins for it (user folders before the packaged one), sorted by name."""
    found: dict[str, Path] = {}
    for folder in _search_order(search):
        if not folder.is_dir():
            continue
        for child in folder.iterdir():
            if child.is_dir() and (child / SPEC_FILE).is_file():
                found.setdefault(child.name, child)
    return dict(sorted(found.items()))


def _is_path(name_or_path: str) -> bool:
    return "/" in name_or_path or "\\" in name_or_path or name_or_path.startswith((".", "~"))


def find_persona(name_or_path: str | Path, search: Sequence[Path] = ()) -> Path:
    """The folder for a persona name (searched) or path (taken as given)."""
    if isinstance(name_or_path, Path) or _is_path(name_or_path):
        folder = Path(name_or_path).expanduser().resolve()
        if not folder.is_dir():
            raise ConfigError(
                "persona folder not found", file=str(folder), field="persona",
                fix=f"create it with {SPEC_FILE} and {SOUL_FILE}, or name a shipped persona",
            )
        return folder
    if not NAME_PATTERN.match(name_or_path):
        raise ConfigError(
            f"{name_or_path!r} is not a persona name", field="persona",
            fix="use a folder name of lowercase letters, digits, - and _, or a path like ./personas/mine",
        )
    order = _search_order(search)
    for folder in order:
        if (folder / name_or_path).is_dir():
            return folder / name_or_path
    names = list(list_personas(search))
    close = difflib.get_close_matches(name_or_path, names, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? Otherwise use" if close else "use"
    raise ConfigError(
        f"no persona folder named {name_or_path!r} in {', '.join(str(f) for f in order)}", field="persona",
        fix=f"{hint} one of: {', '.join(names) or 'none'}; or create {order[0] / name_or_path}/ with {SPEC_FILE} and {SOUL_FILE}",
    )


# --------------------------------------------------------------------------- loading

_RESERVED = {
    "id": "a persona's id is its folder name; rename the folder instead",
    "folder": "the folder is where persona.yaml lives; remove this field",
    "soul": f"the soul is the text of {SOUL_FILE} next to persona.yaml; move it there",
}
_MODEL_FIX = (
    "write `model: provider/name` (e.g. openai/gpt-4o-mini or ollama/llama3), or a mapping with "
    "model, api_base, api_key: env:NAME, backup, temperature, max_tokens, connect_timeout_s, first_token_timeout_s, "
    "timeout_s; `partners doctor` checks it"
)
_cache: dict[Path, tuple[tuple[int, ...], Persona]] = {}
_cache_lock = threading.Lock()


def _fix_for(loc: tuple[Any, ...], kind: str) -> str:
    top = str(loc[0]) if loc else ""
    if top == "model":
        if loc[-1] == "api_key":
            return "write `api_key: env:NAME` (never the key itself) and export NAME in the gateway's environment"
        return _MODEL_FIX
    if kind == "extra_forbidden":
        sections: dict[str, type[BaseModel]] = {"policies": Policies, "tool_rules": ToolRule}
        nested = sections.get(top) if len(loc) > 1 else None
        known = set(nested.model_fields) if nested else set(Persona.model_fields) - set(_RESERVED)
        return f"remove it or check its spelling; known fields here: {', '.join(sorted(known))}"
    if kind == "missing":
        return f"add `{loc[-1]}:` to {SPEC_FILE}"
    if kind == "enum" or kind == "literal_error":
        return "use one of the values listed"
    if top == "languages":
        return "use BCP-47 language tags such as en, es, fr or pt-BR"
    if top == "tool_rules":
        return "write each rule as `remove: [tool, ...]` with optional channel, kind (direct|group), role, group"
    if top in ("tools", "forced_tools"):
        return "list tool names once each, in snake_case (knowledge_search, handoff_to_teacher, ...)"
    if top == "knowledge":
        return "give paths relative to the persona folder, such as notes/ or notes/fractions.md"
    return "correct this value"


def _signature(folder: Path) -> tuple[int, ...]:
    """Changes whenever the folder's entries, persona.yaml or SOUL.md change."""
    stamp: list[int] = [folder.stat().st_mtime_ns]
    for name in (SPEC_FILE, SOUL_FILE):
        try:
            stat = (folder / name).stat()
            stamp += [stat.st_mtime_ns, stat.st_size]
        except FileNotFoundError:
            stamp += [-1, -1]
    return tuple(stamp)


def _read_spec(path: Path) -> dict[str, Any]:
    try:
        raw = read_yaml(path)
    except FileNotFoundError:
        raise ConfigError(
            "missing", file=str(path), fix=f"write {SPEC_FILE} with at least `name:` (copy one from a shipped persona)"
        ) from None
    return _spec_of(raw, path)


def _spec_of(raw: Any, path: Path) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError("must hold a mapping of settings", file=str(path), fix="start with `name: Your Persona`")
    for key, why in _RESERVED.items():
        if key in raw:
            raise ConfigError("not a persona.yaml field", file=str(path), field=key, fix=why)
    return raw


def _read_soul(folder: Path) -> str:
    path = folder / SOUL_FILE
    try:
        soul = read_capped(folder, path, MAX_SOUL_BYTES, SOUL_FIX).strip()
    except FileNotFoundError:
        raise ConfigError(
            "missing", file=str(path), fix="write the persona's voice, teaching style and boundaries in SOUL.md"
        ) from None
    return _soul_of(soul, path)


def _soul_of(soul: str, path: Path) -> str:
    if not soul:
        raise ConfigError("is empty", file=str(path), fix="write the persona's voice, teaching style and boundaries in it")
    return soul


def _check_knowledge(persona: Persona, spec: Path) -> None:
    """Every source exists, and every note under it stays inside the folder and under its cap."""
    for index, path in enumerate(persona.knowledge_paths()):
        if not path.exists():
            confined(persona.folder, path)  # a dangling link outside is refused as a link, not as missing
            raise ConfigError(
                f"{persona.knowledge[index]!r} does not exist", file=str(spec), field=f"knowledge.{index}",
                fix=f"create {path} or remove it from knowledge",
            )
    refused = note_files(persona.folder, persona.knowledge_paths()).refused
    if refused:
        raise refused[0]


def _parse(folder: Path, secrets: Secrets) -> Persona:
    spec = confined(folder, folder / SPEC_FILE)
    return _build(folder, spec, _read_spec(spec), _read_soul(folder), secrets)


def check_persona(folder: Path, spec_text: str, soul_text: str, *, secrets: Secrets = Secrets.RESOLVE) -> Persona:
    """What :func:`load_persona` would make of ``folder`` if its persona.yaml and SOUL.md held these texts.

    The console checks an edit with it before writing the files, so a teacher sees the very error the
    files would get -- same reader, same checks, same file names -- and a persona that would not load is
    never written.  The folder's other files (its notes) are read as they are."""
    spec = folder / SPEC_FILE
    raw = _spec_of(parse_yaml(spec_text, spec), spec)
    data = soul_text.encode("utf-8")
    if len(data) > MAX_SOUL_BYTES:
        raise too_large(folder / SOUL_FILE, len(data), MAX_SOUL_BYTES, SOUL_FIX)
    return _build(folder, spec, raw, _soul_of(soul_text.strip(), folder / SOUL_FILE), secrets)


def _build(folder: Path, spec: Path, raw: dict[str, Any], soul: str, secrets: Secrets) -> Persona:
    if "knowledge" not in raw:
        raw["knowledge"] = ["notes/"] if (folder / "notes").is_dir() else []
    try:
        persona = Persona.model_validate({**raw, "id": folder.name, "folder": folder, "soul": soul}, context=secrets)
    except ValidationError as error:
        errors = error.errors()
        first = errors[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        message = first["msg"].removeprefix("Value error, ")
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
        raise ConfigError(message, file=str(spec), field=field, fix=_fix_for(first["loc"], first["type"])) from None
    _check_knowledge(persona, spec)
    return persona


def load_persona(name_or_path: str | Path, search: Sequence[Path] = (), *, secrets: Secrets = Secrets.RESOLVE) -> Persona:
    """Load a persona by name (user folders in ``search`` first, then the packaged ones) or by path.

    ``secrets``: as its config was loaded (``Config.secrets``).  Only personas whose secrets
    resolved are cached, so one read for a read-only command never serves a gateway.
    Raises :class:`ConfigError` naming the file, the field and the fix.
    """
    folder = find_persona(name_or_path, search)
    if secrets is not Secrets.RESOLVE:
        return _parse(folder, secrets)
    signature = _signature(folder)
    with _cache_lock:
        cached = _cache.get(folder)
    if cached is not None and cached[0] == signature:
        return cached[1]
    persona = _parse(folder, secrets)
    with _cache_lock:
        _cache[folder] = (signature, persona)
    return persona


def load_partner_personas(config: Config) -> dict[str, Persona]:
    """Every partner's persona, by partner id, as its config was loaded (``Config.secrets``).

    ``serve`` and ``chat`` call this before anything starts: a partner started without its
    persona could only apologise to every learner.  A folder that is not there is the
    config's mistake, so it is reported at ``partners.N.persona`` of the config file, with
    the message and fix ``partners doctor`` prints; a problem inside the persona's own
    files names those files.
    """
    search = persona_dirs(config)
    personas: dict[str, Persona] = {}
    for index, partner in enumerate(config.partners):
        try:
            personas[partner.id] = load_persona(partner.persona, search, secrets=config.secrets)
        except ConfigError as error:
            if error.file is not None:
                raise
            raise ConfigError(
                error.message, file=str(config.source or "<embedded default>"), field=f"partners.{index}.persona",
                fix=error.fix,
            ) from None
    return personas
