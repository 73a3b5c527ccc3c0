"""`partners doctor`: every check an operator would otherwise do by hand, each with its fix.

A check returns a :class:`CheckResult` and never raises; the command prints
them all and fails only on errors.  ``serve`` reuses :func:`gateway.config.validate_account` so
a broken account stops it with the same message doctor would print.
"""

from __future__ import annotations

import errno
import os
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import ValidationError

from gateway.config import AccountConfig, Config, account_enabled, validate_account
from gateway.errors import ChannelUnavailable, ConfigError


class Severity(str, Enum):
    OK = "ok"
    WARN = "warn"
    ERROR = "error"


@dataclass(frozen=True)
class CheckResult:
    name: str
    severity: Severity
    message: str
    fix: str = ""


# --------------------------------------------------------------------------- checks


def _problem(error: ConfigError) -> str:
    """The error's text without its fix, which a result carries separately."""
    where = ":".join(p for p in (error.file, error.field) if p)
    return f"{where}: {error.message}" if where else error.message


def _unavailable_fix(channel: str) -> str:
    from gateway.capabilities import platform_catalog

    entry = platform_catalog().get(channel)
    if entry is None:
        return "check the channel name (`partners channels` lists them) or the plugin that provides it"
    if not entry.implemented:
        return "remove this account; `partners channels` lists the channels this release runs"
    if entry.extra:
        return f"pip install 'partners-gateway[{entry.extra}]'"
    return "reinstall partners-gateway"


def check_data_dir(config: Config) -> CheckResult:
    target = config.data_dir
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return CheckResult("data dir", Severity.ERROR, f"{existing} is not a folder", "set data_dir to a folder")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        return CheckResult(
            "data dir", Severity.ERROR, f"{existing} is not writable: {error.strerror}",
            "make it writable for the user that runs the gateway, or set data_dir to a folder it owns",
        )
    note = "is writable" if existing == target else f"will be created (in {existing}, which is writable)"
    return CheckResult("data dir", Severity.OK, f"{target} {note}")


def _gateway_answers(host: str, port: int) -> bool:
    import httpx

    try:
        return httpx.get(f"http://{client_host(host)}:{port}/healthz", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def client_host(host: str) -> str:
    """Where a client on this machine reaches a server bound to ``host``."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def check_port(config: Config) -> CheckResult:
    host, port = config.http.host, config.http.port
    where = f"{host}:{port}"
    if port == 0:
        return CheckResult("http port", Severity.OK, "port 0: a free port is picked at start")
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        socket.create_server((host, port), family=family).close()
    except socket.gaierror as error:
        return CheckResult("http port", Severity.ERROR, f"cannot resolve http.host {host!r}: {error.strerror}", "set http.host to 127.0.0.1 or 0.0.0.0")
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            if _gateway_answers(host, port):
                return CheckResult("http port", Severity.OK, f"{where} is in use by a running Partners Gateway")
            return CheckResult("http port", Severity.ERROR, f"{where} is in use by another program", "stop it, or set http.port (or serve --port) to a free port")
        if error.errno == errno.EACCES:
            return CheckResult("http port", Severity.ERROR, f"not allowed to listen on {where}", "use a port above 1023")
        if error.errno == errno.EADDRNOTAVAIL:
            return CheckResult("http port", Severity.ERROR, f"{host} is not an address of this machine", "set http.host to 127.0.0.1 or 0.0.0.0")
        return CheckResult("http port", Severity.ERROR, f"cannot listen on {where}: {error.strerror}", "set http.host and http.port to an address this machine can serve")
    return CheckResult("http port", Severity.OK, f"{where} is free")


def check_account(config: Config, channel: str, account: str) -> list[CheckResult]:
    from channels.registry import load_channel

    name = f"{channel}/{account}"
    if not account_enabled(config, channel, account):
        return [CheckResult(name, Severity.OK, "disabled (enabled: false)")]
    results: list[CheckResult] = []
    model: type[AccountConfig] | None = None
    try:
        model = load_channel(channel).config_model
    except ChannelUnavailable as error:
        results.append(CheckResult(name, Severity.ERROR, f"will not run: {error}", _unavailable_fix(channel)))
    try:
        validate_account(config, channel, account, model)
    except ConfigError as error:
        results.append(CheckResult(name, Severity.ERROR, _problem(error), error.fix or "correct this setting"))
    if not results:
        results.append(CheckResult(name, Severity.OK, "channel loads and its settings are valid"))
    return results


def check_bindings(config: Config) -> list[CheckResult]:
    results: list[CheckResult] = []
    bound = {b.partner for b in config.bindings}
    for partner in config.partners:
        if partner.id not in bound:
            results.append(CheckResult(
                f"partner {partner.id}", Severity.WARN, "has no binding, so no one can reach it",
                f"add a binding: {{partner: {partner.id}, channel: webchat, account: default}}",
            ))
    configured = {(c, a) for c, accounts in config.channels.items() for a in accounts}
    for index, binding in enumerate(config.bindings):
        if (binding.channel, binding.account) not in configured:
            results.append(CheckResult(
                f"bindings.{index}", Severity.WARN, f"routes {binding.channel}/{binding.account}, which is not under channels:",
                f"add channels.{binding.channel}.{binding.account}, or remove the binding",
            ))
    routed = {(b.channel, b.account) for b in config.bindings}
    for channel, account in sorted(configured - routed):
        results.append(CheckResult(
            f"{channel}/{account}", Severity.WARN, "no binding routes this account to a partner, so its messages go unanswered",
            f"add a binding: {{partner: ..., channel: {channel}, account: {account}}}",
        ))
    if not config.partners:
        results.append(CheckResult("partners", Severity.ERROR, "no partner is configured", "add one under partners: (see `partners init`)"))
    elif not results:
        results.append(CheckResult("bindings", Severity.OK, f"{len(config.partners)} partner(s), each bound"))
    return results


def check_models(config: Config) -> list[CheckResult]:
    """Per partner: does its persona load, is a language model configured, are its tools known."""
    from brain.notes import model_status
    from brain.tools.builtin import TOOL_NAMES
    from personas.loader import load_persona, persona_dirs

    results = []
    for partner in config.partners:
        name = f"partner {partner.id}"
        try:
            persona = load_persona(partner.persona, persona_dirs(config))
        except ConfigError as error:
            results.append(CheckResult(name, Severity.ERROR, _problem(error), error.fix or "correct the persona folder"))
            continue
        unknown = sorted(set(persona.enabled_tools) - TOOL_NAMES)
        if unknown:
            results.append(CheckResult(
                name, Severity.ERROR, f"persona {persona.id} enables unknown tools: {', '.join(unknown)}",
                f"use only: {', '.join(sorted(TOOL_NAMES))}",
            ))
        message, fix = model_status(persona, partner)
        results.append(CheckResult(name, Severity.WARN if fix else Severity.OK, message, fix))
    return results


def check_knowledge(config: Config) -> list[CheckResult]:
    """Per partner with a knowledge base: its ``knowledge.yaml`` loads and its engine is installed here.

    Looks for the engine's packages without importing them (``serve`` runs this too)."""
    from brain.knowledge.service import KNOWLEDGE_DIR
    from brain.knowledge.settings import folder_of, load_settings, missing_extra

    results = []
    for partner in config.partners:
        folder = folder_of(config.data_dir / KNOWLEDGE_DIR, partner.id)
        if not folder.is_dir():
            continue
        name = f"knowledge {partner.id}"
        try:
            settings = load_settings(folder)
        except ConfigError as error:
            results.append(CheckResult(name, Severity.ERROR, _problem(error), error.fix or "correct the file"))
            continue
        missing = missing_extra(settings)
        if missing is not None:
            results.append(CheckResult(name, Severity.ERROR, f"{missing.message}: the partner's documents are not searched",
                                       missing.fix or ""))
        else:
            results.append(CheckResult(name, Severity.OK, f"{settings.engine} engine"))
    return results


def check_config(load: Callable[[], Config]) -> tuple[CheckResult, Config | None]:
    try:
        config = load()
    except ConfigError as error:
        return CheckResult("config", Severity.ERROR, _problem(error), error.fix or "correct the file"), None
    if config.source is None:
        return CheckResult("config", Severity.OK, "no config file: using the embedded default (`partners init` writes one)"), config
    return CheckResult("config", Severity.OK, f"{config.source} loads"), config


def run_checks(load: Callable[[], Config]) -> list[CheckResult]:
    """All checks in order; nothing after the config check runs if the config does not load."""
    first, config = check_config(load)
    if config is None:
        return [first]
    results = [first, check_data_dir(config), check_port(config)]
    for channel, accounts in config.channels.items():
        for account in accounts:
            results.extend(check_account(config, channel, account))
    results.extend(check_bindings(config))
    results.extend(check_models(config))
    results.extend(check_knowledge(config))
    return results
