"""Reading ``partners.yaml``: the file, its problems in a teacher's words, and each account's settings.

The models of a valid config are vocabulary (:mod:`gateway.core.config`); this
module is the application side of them: it reads the YAML file, resolves a
relative ``data_dir`` against the file's folder, lists every problem of a file
at once with its place and fix, checks each account's ``env:NAME`` references
before anything starts -- and, from its import on, hands every secret a model
resolves to the log scrubber (:func:`gateway.redaction.register_secret`), so a
config is never read without its secrets being masked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gateway.core.config import AccountConfig, Config, Secrets, on_secret_resolved
from gateway.core.errors import ConfigError, Problem
from gateway.redaction import register_secret
from gateway.validation import place, problems
from gateway.yamlfile import decode_utf8, parse_yaml

on_secret_resolved(register_secret)

DEFAULT_CONFIG_NAME = "partners.yaml"


def parse_config(raw: Any, *, source: str = "<config>", secrets: Secrets = Secrets.RESOLVE) -> Config:
    """Validate a config's settings; a :class:`ConfigError` lists every problem of the file at once."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("the file must hold a mapping of settings", file=source, fix="start from `partners init`")
    try:
        config = Config.model_validate(raw, context=secrets)
    except ValidationError as error:
        raise ConfigError.of(problems(error, Config, raw=raw), file=source) from None
    config._secrets = secrets  # not a setting: a file cannot choose it
    return config


def _env_references(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str) and value.startswith("env:"):
        yield path, value[4:]
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _env_references(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _env_references(item, f"{path}.{index}")


def account_enabled(config: Config, channel: str, account: str) -> bool:
    return (config.channels[channel][account] or {}).get("enabled", True) is not False


def validate_account(config: Config, channel: str, account: str, model: type[AccountConfig] | None) -> AccountConfig:
    """Validate one account's settings; ``model`` None checks only the common part.

    Every ``env:NAME`` reference must resolve, whether or not the channel can
    load here, so a missing secret is reported before anything starts.
    Raises one :class:`ConfigError` listing every problem of the account, each
    with its field and fix; secret values never appear in it.
    """
    source = str(config.source or "<embedded default>")
    prefix = ("channels", channel, account)
    raw = config.channels[channel][account] or {}
    found = [
        Problem(field, f"environment variable {name} is not set", f"export {name}=... in the gateway's environment before starting it")
        for field, name in _env_references(raw, place(*prefix)) if name not in os.environ
    ]
    settings = raw if model is not None else {k: v for k, v in raw.items() if k in AccountConfig.model_fields}
    try:
        validated = (model or AccountConfig).model_validate(settings)
    except ValidationError as error:
        unset = {p.field for p in found}  # already reported, with the variable's name
        found += [p for p in problems(error, model or AccountConfig, raw=settings, prefix=prefix) if p.field not in unset]
    if found:
        raise ConfigError.of(found, file=source)
    return validated


def load_config(path: Path, *, secrets: Secrets = Secrets.RESOLVE) -> Config:
    """Read and validate a config file; relative ``data_dir`` resolves against the file's folder.

    ``secrets``: :attr:`Secrets.DEFER` for commands that never use the secrets (see :class:`Secrets`).
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError("file not found", file=str(path), fix="run `partners init` to write one") from None
    return config_from_text(decode_utf8(data, path), path, secrets=secrets)


def config_from_text(text: str, path: Path, *, secrets: Secrets = Secrets.RESOLVE) -> Config:
    """The config ``path`` would hold with ``text`` in it: what :func:`load_config` reads, and what the
    console checks an edit with before it writes one (:mod:`gateway.configedit`), so both see one error."""
    config = parse_config(parse_yaml(text, path), source=str(path), secrets=secrets)
    data_dir = config.data_dir if config.data_dir.is_absolute() else (path.parent / config.data_dir)
    return config.model_copy(update={"data_dir": data_dir.resolve(), "source": path})
