"""`partners doctor`: every check an operator would otherwise do by hand, each with its fix.

A check returns a :class:`CheckResult` and never raises; the command prints
them all and fails only on errors.  ``serve`` reuses :func:`gateway.configfile.validate_account`
and each channel's :meth:`~channels.base.Channel.check` so a broken account stops it
with the same message doctor would print.

Two depths.  ``doctor --offline`` checks the shape: the config loads, the data
dir is writable, the port is free (or held by this data dir's own gateway),
each account's settings validate and show no placeholder or impossible value.
``doctor`` then asks every peer whether the settings *work* -- each channel's
:meth:`~channels.base.Channel.probe` and a one-token request to each partner's
model (:func:`brain.probe.probe_model`) -- all at once, each bounded by
``PROBE_TIMEOUT_S``.  No secret the config resolves ever appears in a result.

The accounts added in the console (sealed in ``gateway.db``, ADR 0040) are checked the same way,
named ``channel/account (console)``, once ``PARTNERS_SECRET_KEY`` opens them; without the key
doctor lists them as there and unchecked, the reason serve would not start.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gateway import datadir
from gateway.configfile import account_enabled, validate_account
from gateway.core.config import Config, GroupPolicy, ModelSettings
from gateway.core.errors import ChannelUnavailable, ConfigError
from gateway.core.probes import Gravity, ProbeResult, Problem
from gateway.extras import install_command

if TYPE_CHECKING:  # pragma: no cover - typing only
    from channels.base import Channel
    from gateway.core.config import AccountConfig
    from gateway.store.accounts import StoredAccount
    from gateway.store.schema import Schema

VALID = "channel loads and its settings are valid"
PROBE_TIMEOUT_S = 15.0
"""Generous: a real provider's first answer or a TLS handshake across the world fits well inside it."""


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
    from gateway.core.capabilities import platform_catalog

    entry = platform_catalog().get(channel)
    if entry is None:
        return "check the channel name (`partners channels` lists them) or the plugin that provides it"
    if not entry.implemented:
        return "remove this account; `partners channels` lists the channels this release runs"
    if entry.extra:
        return install_command(entry.extra)
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


class PortHolder(str, Enum):
    FREE = "free"
    THIS_GATEWAY = "this gateway"
    """A Partners Gateway on this very data dir already serves the port."""
    OTHER_GATEWAY = "another gateway"
    OTHER_PROGRAM = "another program"
    UNUSABLE = "unusable"
    """The address cannot be served at all (not this machine's, a privileged port)."""


def _healthz(host: str, port: int) -> dict[str, Any] | None:
    """The /healthz answer of a Partners Gateway on that port, or None when none answers."""
    import httpx

    try:
        response = httpx.get(f"http://{client_host(host)}:{port}/healthz", timeout=5.0, trust_env=False)
    except httpx.HTTPError:
        return None
    try:
        answer = response.json()
    except ValueError:
        return None
    return answer if isinstance(answer, dict) and "ok" in answer else None


def _is_this_data_dir(answer: dict[str, Any], config: Config) -> bool:
    said = answer.get("data_dir_id")
    if said is not None:
        return said == datadir.identity(config.data_dir)
    return datadir.in_use(config.data_dir)  # a gateway too old to say: the data dir's lock tells


def client_host(host: str) -> str:
    """Where a client on this machine reaches a server bound to ``host``."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def check_port(config: Config) -> CheckResult:
    return port_holder(config)[1]


def port_holder(config: Config) -> tuple[PortHolder, CheckResult]:
    """Who holds ``http.host:http.port``, and what doctor says about it.

    Held by a gateway on this data dir is fine for doctor (it is running) but stops a second ``serve``."""
    host, port = config.http.host, config.http.port
    where = f"{host}:{port}"
    if port == 0:
        return PortHolder.FREE, CheckResult("http port", Severity.OK, "port 0: a free port is picked at start")
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        socket.create_server((host, port), family=family).close()
    except socket.gaierror as error:
        return PortHolder.UNUSABLE, CheckResult(
            "http port", Severity.ERROR, f"cannot resolve http.host {host!r}: {error.strerror}", "set http.host to 127.0.0.1 or 0.0.0.0")
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            return _in_use(config, where)
        if error.errno == errno.EACCES:
            return PortHolder.UNUSABLE, CheckResult(
                "http port", Severity.ERROR, f"not allowed to listen on {where}", "use a port above 1023")
        if error.errno == errno.EADDRNOTAVAIL:
            return PortHolder.UNUSABLE, CheckResult(
                "http port", Severity.ERROR, f"{host} is not an address of this machine", "set http.host to 127.0.0.1 or 0.0.0.0")
        return PortHolder.UNUSABLE, CheckResult(
            "http port", Severity.ERROR, f"cannot listen on {where}: {error.strerror}",
            "set http.host and http.port to an address this machine can serve")
    if datadir.in_use(config.data_dir):
        return PortHolder.FREE, CheckResult(
            "http port", Severity.OK, f"{where} is free (a gateway on this data dir runs elsewhere: `partners chat`, or serve --port)")
    return PortHolder.FREE, CheckResult("http port", Severity.OK, f"{where} is free")


def _in_use(config: Config, where: str) -> tuple[PortHolder, CheckResult]:
    answer = _healthz(config.http.host, config.http.port)
    if answer is None:
        return PortHolder.OTHER_PROGRAM, CheckResult(
            "http port", Severity.ERROR, f"{where} is in use by another program",
            "stop it, or set http.port (or serve --port) to a free port")
    if _is_this_data_dir(answer, config):
        return PortHolder.THIS_GATEWAY, CheckResult(
            "http port", Severity.OK, f"{where} is served by the Partners Gateway of this data dir ({config.data_dir}): it is running",
            "it is already serving: `partners status` shows it; stop it (Ctrl-C or SIGTERM) before starting it again")
    return PortHolder.OTHER_GATEWAY, CheckResult(
        "http port", Severity.ERROR, f"{where} is in use by another Partners Gateway, one with another data dir",
        "stop that gateway, or give this one a free port (http.port, or serve --port)")


def check_account(config: Config, channel: str, account: str) -> list[CheckResult]:
    from channels.registry import load_channel

    name = f"{channel}/{account}"
    if not account_enabled(config, channel, account):
        return [CheckResult(name, Severity.OK, "disabled (enabled: false)")]
    results: list[CheckResult] = []
    cls = None
    try:
        cls = load_channel(channel)
    except ChannelUnavailable as error:
        results.append(CheckResult(name, Severity.ERROR, f"will not run: {error}", _unavailable_fix(channel)))
    try:
        settings = validate_account(config, channel, account, cls.config_model if cls else None)
    except ConfigError as error:
        results.append(CheckResult(name, Severity.ERROR, _problem(error), error.fix or "correct this setting"))
    else:
        if cls is not None:
            results.extend(_from_problem(name, p) for p in cls.check(settings))
    if not results:
        results.append(CheckResult(name, Severity.OK, VALID))
    return results


def _from_problem(name: str, problem: Problem) -> CheckResult:
    severity = Severity.ERROR if problem.gravity is Gravity.ERROR else Severity.WARN
    return CheckResult(name, severity, problem.message, problem.fix)


def _from_probe(name: str, result: ProbeResult) -> list[CheckResult]:
    if not result.problems:
        return [CheckResult(name, Severity.OK, f"works: {result.checked}")]
    return [_from_problem(name, p) for p in result.problems]


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


def check_group_reach(config: Config) -> list[CheckResult]:
    """Group settings the platform cannot honour, by its declared ``group_addressing``.

    A platform that shows the bot only the group messages that mention it (Telegram's privacy mode,
    QQ, Feishu without the group-message scope) never delivers the rest, so ``group: always`` or
    ``keyword`` answers less than the teacher expects; one without group chats ignores group settings."""
    from gateway.core.capabilities import GroupAddressing, platform_catalog

    results: list[CheckResult] = []
    for channel, accounts in config.channels.items():
        entry = platform_catalog().get(channel)
        if entry is None:
            continue  # a plugin: it declares its own capabilities once loaded
        addressing = entry.capabilities.group_addressing
        for account in accounts:
            if not account_enabled(config, channel, account):
                continue
            try:
                access = validate_account(config, channel, account, None).access
            except ConfigError:
                continue  # reported by check_account
            name = f"{channel}/{account}"
            if addressing is GroupAddressing.DIRECT_ONLY and (access.group is not GroupPolicy.MENTION or access.groups):
                results.append(CheckResult(name, Severity.WARN, f"{entry.title} has no group chats for bots, so "
                                           "access.group and access.groups do nothing", "remove them"))
            elif addressing is GroupAddressing.MENTION and access.group in (GroupPolicy.ALWAYS, GroupPolicy.KEYWORD):
                results.append(CheckResult(
                    name, Severity.WARN, f"{entry.title} shows the bot only group messages that mention it or reply to "
                    f"it, so group: {access.group.value} answers only those",
                    "mention the bot in groups, or let it read every group message on the platform (Telegram: "
                    "/setprivacy in BotFather, then re-add the bot)"))
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


# --------------------------------------------------------------------------- probes


class _NoInbound:
    """The sink and cursor store a probing channel is handed: a probe reads nothing and moves no cursor."""

    async def accept(self, messages: Any) -> None:
        raise RuntimeError("a probe must not accept messages")

    def invalid(self, reason: str) -> None:
        raise RuntimeError("a probe must not record events")

    def refused(self, rule: str, detail: str) -> None:
        raise RuntimeError("a probe must not record events")

    def late_ack(self, took_s: float, deadline_s: float) -> None:
        raise RuntimeError("a probe must not record events")

    async def undelivered(self, target: Any, reason: str) -> None:
        raise RuntimeError("a probe must not record events")

    async def get(self, name: str) -> str | None:
        raise RuntimeError("a probe must not read cursors")

    async def put(self, name: str, value: str, *, keep_s: float | None = None) -> None:
        raise RuntimeError("a probe must not move cursors")


async def _bounded(probe: Callable[[], Any], checked: str, timeout: float) -> ProbeResult:
    """Run one probe within ``timeout``; a hang or a bug becomes a problem, never an exception."""
    try:
        return await asyncio.wait_for(probe(), timeout)
    except TimeoutError:
        return ProbeResult.failed(checked, f"no answer within {timeout:g} s",
                                  "check the network and the address in the settings; a server this slow will fail learners too")
    except Exception as error:  # a probe must not take doctor down; its text may hold a URL, so only the type
        return ProbeResult.failed(checked, f"the check itself failed ({type(error).__name__})",
                                  "run `partners serve --log-level debug` to see more, and report it")


async def probe_account(config: Config, channel: str, account: str, timeout: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Build the account's channel as the gateway would, ask it to probe, and close it again."""
    from channels.registry import load_channel

    cls = load_channel(channel)
    settings = validate_account(config, channel, account, cls.config_model)
    return await probe_settings(cls, settings, account, config.data_dir / "channels" / channel / account, timeout)


async def probe_settings(cls: type[Channel], settings: AccountConfig, account: str, data_dir: Path,
                         timeout: float = PROBE_TIMEOUT_S) -> ProbeResult:
    """Probe an account of ``cls`` with validated ``settings`` (the file's, or a form's in the console)."""
    from channels.base import ChannelContext
    from gateway.core.messages import AccountId

    inert = _NoInbound()
    instance = cls(ChannelContext(account=AccountId(account), config=settings, sink=inert, cursors=inert,
                                  data_dir=data_dir))
    try:
        return await _bounded(instance.probe, f"{cls.name}/{account}", timeout)
    finally:
        try:
            await asyncio.wait_for(instance.close(), timeout)
        except Exception:  # closing after a failed probe must not hide what the probe found
            pass


async def _model_probe(settings: ModelSettings, timeout: float) -> ProbeResult:
    """The model's probe, bounded once litellm is imported: seconds of import are not the model's time."""
    from brain.model import load_litellm
    from brain.probe import probe_model

    await asyncio.to_thread(load_litellm)
    return await _bounded(lambda: probe_model(settings, timeout=timeout), settings.model, timeout)


def _model_settings(config: Config) -> list[tuple[str, ModelSettings]]:
    """Each partner's effective model (its own, else its persona's); partners whose persona fails are left
    to :func:`check_models`."""
    from personas.loader import load_persona, persona_dirs

    found = []
    for partner in config.partners:
        try:
            persona = load_persona(partner.persona, persona_dirs(config))
        except ConfigError:
            continue
        settings = partner.model or persona.model
        if settings is not None:
            found.append((partner.id, settings))
    return found


async def run_probes(config: Config, probable: list[tuple[str, str]], timeout: float = PROBE_TIMEOUT_S) -> list[CheckResult]:
    """Every account probe and every model probe, all at once."""
    jobs: list[tuple[str, Any]] = [
        (f"{channel}/{account}", probe_account(config, channel, account, timeout)) for channel, account in probable
    ]
    asked: dict[str, asyncio.Task[ProbeResult]] = {}  # partners sharing one model are asked once
    for partner, settings in _model_settings(config):
        key = settings.model_dump_json()
        if key not in asked:
            asked[key] = asyncio.ensure_future(_model_probe(settings, timeout))
        jobs.append((f"partner {partner}", asked[key]))
    found = await asyncio.gather(*(job for _, job in jobs))
    results: list[CheckResult] = []
    for (name, _), result in zip(jobs, found, strict=True):
        if name.startswith("partner ") and not result.problems:
            results.append(CheckResult(name, Severity.OK, f"model {result.checked}"))
        else:
            results.extend(_from_probe(name, result))
    return results


# --------------------------------------------------------------------------- accounts added in the console

CONSOLE = "(console)"
"""Marks an account added in the console in doctor's names (``telegram/main (console)``): its fix is there."""


@dataclass(frozen=True)
class ConsoleAccounts:
    """What doctor found of the accounts added in the console: each one's findings, the ones to probe, their secrets."""

    results: list[CheckResult]
    probable: list[tuple[str, type[Channel], AccountConfig]]
    """Account name, its channel class and its validated settings: the ones whose shape passed."""
    secrets: list[str]
    shut: bool = False
    """The key is missing or opens not all of them: serve's start stops with one line naming the variable."""


def _stored_rows(config: Config) -> list[StoredAccount]:
    """The console-made rows of ``gateway.db``, read through the store's own query on a read-only connection
    (doctor changes no file); none when there is no store yet or it predates them (check_stores says why)."""
    import sqlite3

    from gateway.store.accounts import read_stored_accounts

    path = config.database_path
    if not path.is_file():
        return []
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return []
    try:
        return read_stored_accounts(conn)
    except sqlite3.Error:
        return []
    finally:
        conn.close()


def check_console_accounts(config: Config) -> ConsoleAccounts:
    """Each account added in the console, opened with ``PARTNERS_SECRET_KEY`` and validated as serve would.

    Without the key they are listed by name, unchecked: serve will not start without it either."""
    from channels.registry import load_channel
    from gateway.accounts import model_for_kind, secrets_of, unseal, validate_settings
    from gateway.secretbox import KEY_ENV, SecretBox

    rows = _stored_rows(config)
    if not rows:
        return ConsoleAccounts([], [], [])
    names = ", ".join(f"{r.channel}/{r.account}" for r in rows)
    try:
        box = SecretBox.from_env()
    except ConfigError as error:
        return ConsoleAccounts([CheckResult("console accounts", Severity.ERROR, _problem(error), error.fix or "")], [], [],
                               shut=True)
    if box is None:
        return ConsoleAccounts([CheckResult(
            "console accounts", Severity.ERROR,
            f"{len(rows)} account(s) added in the console ({names}) cannot be checked: their settings are sealed "
            f"and {KEY_ENV} is not set", f"set {KEY_ENV} to the key they were added with; serve needs it too")], [], [],
            shut=True)
    results: list[CheckResult] = []
    probable: list[tuple[str, type[Channel], AccountConfig]] = []
    secrets: list[str] = []
    partners = {p.id for p in config.partners}
    shut = False
    for row in rows:
        name = f"{row.channel}/{row.account} {CONSOLE}"
        try:
            raw = unseal(box, row.sealed, what=f"the settings of console account {row.channel}/{row.account}")
        except ConfigError as error:
            results.append(CheckResult(name, Severity.ERROR, _problem(error), error.fix or ""))
            shut = True
            continue
        try:
            cls = load_channel(row.channel)
            secrets += secrets_of(model_for_kind(cls.config_model, raw.get("kind")), raw)
            settings = validate_settings(cls.config_model, raw, where=f"console account {row.channel}/{row.account}")
        except ChannelUnavailable as error:
            results.append(CheckResult(name, Severity.ERROR, f"will not run: {error}", _unavailable_fix(row.channel)))
            continue
        except ConfigError as error:
            results.append(CheckResult(name, Severity.ERROR, _problem(error), error.fix or "delete it in the console and add it again"))
            continue
        if row.account in config.channels.get(row.channel, {}):
            results.append(CheckResult(name, Severity.WARN, f"does not run: partners.yaml has an account {row.channel}/"
                                       f"{row.account} too", "rename that one, or delete this one in the console"))
            continue
        if row.partner not in partners:
            results.append(CheckResult(name, Severity.WARN, f"does not run: its partner {row.partner} is no longer in "
                                       "partners.yaml", "delete it in the console, or put the partner back"))
            continue
        found = [_from_problem(name, p) for p in cls.check(settings)]
        results.extend(found or [CheckResult(name, Severity.OK, VALID)])
        if all(r.severity is Severity.OK for r in found):
            probable.append((row.account, cls, settings))
    return ConsoleAccounts(results, probable, secrets, shut=shut)


async def probe_console_accounts(config: Config, accounts: ConsoleAccounts, timeout: float) -> list[CheckResult]:
    found = await asyncio.gather(*(probe_settings(cls, settings, account, config.data_dir / "channels" / cls.name / account,
                                                  timeout) for account, cls, settings in accounts.probable))
    return [r for (account, cls, _), result in zip(accounts.probable, found, strict=True)
            for r in _from_probe(f"{cls.name}/{account} {CONSOLE}", result)]


# --------------------------------------------------------------------------- secrets


def _env_values(value: Any) -> Iterator[str]:
    if isinstance(value, str) and value.startswith("env:"):
        yield os.environ.get(value[4:], "")
    elif isinstance(value, dict):
        for item in value.values():
            yield from _env_values(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _env_values(item)


def _secrets(config: Config) -> list[str]:
    """Every secret the config resolves (env: references of the accounts, model keys): none may be printed."""
    values = list(_env_values(config.channels))
    for _, settings in [*((p.id, p.model) for p in config.partners if p.model), *_model_settings(config)]:
        current: ModelSettings | None = settings
        while current is not None:
            if current.api_key is not None:
                values.append(current.api_key.get_secret_value())
            current = current.backup
    if config.http.admin_token is not None:
        values.append(config.http.admin_token.get_secret_value())
    values += [entry.token.get_secret_value() for entry in config.http.admin_tokens]
    return sorted({v for v in values if len(v) >= 4}, key=len, reverse=True)


def redact(results: list[CheckResult], secrets: list[str]) -> list[CheckResult]:
    def clean(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, "<secret>")
        return text

    return [CheckResult(r.name, r.severity, clean(r.message), clean(r.fix)) for r in results]


# --------------------------------------------------------------------------- all of it


def store_files(config: Config) -> list[tuple[Path, tuple[Schema, ...]]]:
    """Every SQLite file this data dir may hold, with the schemas it carries (one list, so none is forgotten)."""
    from brain.knowledge.catalog import CATALOG_SCHEMA
    from brain.knowledge.fts import FTS_INDEX
    from brain.knowledge.service import KNOWLEDGE_DIR
    from brain.knowledge.settings import CATALOG_FILE
    from brain.memory import MEMORY_FILE
    from brain.memory.store import MemoryStore
    from brain.notes import NOTES_INDEX
    from brain.session_log import SessionLog
    from brain.usage import UsageLedger
    from gateway.store.migrations import GATEWAY_SCHEMA

    data = config.data_dir
    files: list[tuple[Path, tuple[Schema, ...]]] = [
        (config.database_path, (GATEWAY_SCHEMA,)),
        (data / MEMORY_FILE, (MemoryStore.schema,)),
        (data / "brain.db", (SessionLog.schema, UsageLedger.schema)),
        (data / "notes-index.db", (NOTES_INDEX,)),
    ]
    files += [(path, (CATALOG_SCHEMA, FTS_INDEX)) for path in sorted((data / KNOWLEDGE_DIR).glob(f"*/{CATALOG_FILE}"))]
    ledgers = sorted((data / "channels" / "email").glob("*/sent.sqlite3"))
    if ledgers:  # the email package needs its extra; without it the account check says so
        try:
            from channels.email.ledger import LEDGER_SCHEMA
        except ImportError:
            return files
        files += [(path, (LEDGER_SCHEMA,)) for path in ledgers]
    return files


def check_stores(config: Config, *, thorough: bool = True) -> list[CheckResult]:
    """Open each store file that exists and report one that cannot be used, with its fix.

    ``thorough`` (doctor) reads every page (``PRAGMA quick_check``); ``serve`` looks only at
    the header and the schema versions before it starts, which costs nothing on a big file."""
    from gateway.store.schema import check

    results: list[CheckResult] = []
    for path, schemas in store_files(config):
        if not path.is_file():
            continue
        problem = check(path, schemas, thorough=thorough)
        if problem is not None:
            cache = schemas[0].name == "notes index"  # rebuilt by itself at the next start
            results.append(CheckResult(f"store {path.name}", Severity.WARN if cache else Severity.ERROR,
                                       f"{path} {problem.problem}", problem.fix))
    if not results:
        results.append(CheckResult("stores", Severity.OK, "every store file opens and passes its checks"))
    return results


def run_checks(load: Callable[[], Config], *, offline: bool = False, timeout: float = PROBE_TIMEOUT_S) -> list[CheckResult]:
    """All checks in order; nothing after the config check runs if the config does not load.

    Offline, only the shape; otherwise each account whose shape passed, and each partner's model, is
    probed too (concurrently, each within ``timeout``)."""
    first, config = check_config(load)
    if config is None:
        return [first]
    results = [first, check_data_dir(config), check_port(config), *check_stores(config)]
    probable: list[tuple[str, str]] = []
    for channel, accounts in config.channels.items():
        for account in accounts:
            found = check_account(config, channel, account)
            results.extend(found)
            if account_enabled(config, channel, account) and all(r.severity is Severity.OK for r in found):
                probable.append((channel, account))
    console = check_console_accounts(config)
    results.extend(console.results)
    results.extend(check_bindings(config))
    results.extend(check_group_reach(config))
    results.extend(check_models(config))
    results.extend(check_knowledge(config))
    if not offline:
        results = _merge(results, asyncio.run(_all_probes(config, probable, console, timeout)))
    return redact(results, sorted({*_secrets(config), *(v for v in console.secrets if len(v) >= 4)}, key=len, reverse=True))


async def _all_probes(config: Config, probable: list[tuple[str, str]], console: ConsoleAccounts,
                      timeout: float) -> list[CheckResult]:
    """The file's accounts and models, and the console's accounts, probed at once."""
    filed, made = await asyncio.gather(run_probes(config, probable, timeout), probe_console_accounts(config, console, timeout))
    return [*filed, *made]


def _merge(shape: list[CheckResult], probed: list[CheckResult]) -> list[CheckResult]:
    """Each probe's findings right after the shape findings of the same account or partner; an account's
    "settings are valid" line gives way to what its probe found."""
    by_name: dict[str, list[CheckResult]] = {}
    for result in probed:
        by_name.setdefault(result.name, []).append(result)
    last = {r.name: i for i, r in enumerate(shape)}
    merged: list[CheckResult] = []
    for index, result in enumerate(shape):
        if not (result.name in by_name and result.message == VALID and not result.name.startswith("partner ")):
            merged.append(result)
        if last.get(result.name) == index:
            merged.extend(by_name.pop(result.name, ()))
    return merged + [r for rest in by_name.values() for r in rest]
