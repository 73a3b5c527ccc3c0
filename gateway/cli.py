"""The `partners` command.

Start-up time is a feature: this module imports only click, and every command
imports what it needs when it runs, so ``partners --help`` never loads
pydantic, the HTTP stack or a model client.  A configuration error ends any
command with exit status 2 and one line naming the file, the field and the
fix -- never a traceback, never a secret.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # pragma: no cover - typing only
    from gateway.core.config import Config
    from gateway.core.errors import ConfigError
    from gateway.status import StatusReport

EXIT_CONFIG = 2
DEFAULT_FIX = "correct it in the file, then check with `partners doctor`"


def config_message(error: ConfigError) -> str:
    """The error as printed: every problem, each with its own fix (a lone one without gets the general fix)."""
    return str(error) if error.fix or len(error.problems) > 1 else f"{error} (fix: {DEFAULT_FIX})"


CONFIG_HELP = "Config file (default: $PARTNERS_CONFIG, else ./partners.yaml if present, else the embedded default)."


def _remember_config(ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
    if value is not None:  # given after the command: it wins over one given before it or $PARTNERS_CONFIG
        ctx.obj = value
    return value


class _ReadsConfig(click.Command):
    """A command that also takes ``--config`` after its name: ``partners serve -c FILE``.

    Every command of the ``partners`` group (and of its subgroups) is one, so the
    option is declared once here rather than copied onto each command.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(click.Option(
            ["--config", "-c", "config_path"], type=click.Path(dir_okay=False, path_type=Path),
            expose_value=False, callback=_remember_config, help=CONFIG_HELP,
        ))


class _Partners(click.Group):
    """Turns a ConfigError raised anywhere below into its message and exit status 2."""

    command_class = _ReadsConfig
    group_class = type  # subgroups (pairing, memory, ...) are _Partners too, so their commands read --config

    def invoke(self, ctx: click.Context) -> Any:
        from gateway.core.errors import ConfigError
        from gateway.store.schema import StoreError

        try:
            return super().invoke(ctx)
        except ConfigError as error:
            click.echo(f"error: {config_message(error)}", err=True)
            ctx.exit(EXIT_CONFIG)
        except StoreError as error:  # a store file a command cannot use: its name, the problem, the fix
            click.echo(f"error: {error}", err=True)
            ctx.exit(1)


def _load(ctx: click.Context, *, resolve_secrets: bool = True) -> Config:
    """The config the command runs with.

    ``resolve_secrets=False`` for commands that only read the data dir or the address
    (status, pairing, people, kb...): an unset ``env:`` variable then fails only if
    something uses that secret, so they run without the model's key.
    """
    from gateway.core.config import Secrets
    from gateway.defaults import load

    return load(ctx.obj, secrets=Secrets.RESOLVE if resolve_secrets else Secrets.DEFER)


def _embedded_note(config: Config) -> str:
    return (
        f"No config file: using the embedded default (Study Buddy on web chat, data in {config.data_dir}). "
        "`partners init` writes a config you can edit."
    )


def _table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in (headers, *rows)]
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


@click.group(cls=_Partners, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config", "-c", "config_path", type=click.Path(dir_okay=False, path_type=Path), envvar="PARTNERS_CONFIG", help=CONFIG_HELP,
)
@click.version_option(package_name="partners-gateway")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None) -> None:
    """Partners Gateway: AI tutor partners on the chat apps learners already use."""
    from gateway.redaction import protect_logging

    protect_logging()  # before any command logs: a library's warning may carry a token (gateway.redaction)
    ctx.obj = config_path


# --------------------------------------------------------------------------- init


@cli.command()
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
@click.pass_context
def init(ctx: click.Context, path: Path | None, force: bool) -> None:
    """Write a commented config file (default: the --config path, else ./partners.yaml)."""
    from gateway.configfile import DEFAULT_CONFIG_NAME
    from gateway.defaults import INIT_TEMPLATE

    path = path or ctx.obj or Path(DEFAULT_CONFIG_NAME)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with path.open("w" if force else "x", encoding="utf-8") as fh:
            fh.write(INIT_TEMPLATE)
    except FileExistsError:
        click.echo(f"error: {path} already exists; pass --force to overwrite it", err=True)
        ctx.exit(1)
    flag = "" if path == Path(DEFAULT_CONFIG_NAME) else f" -c {path}"
    me = _invoked_as()
    click.echo(
        f"Wrote {path}.\n\nNext:\n"
        f"  {me}{flag} doctor   check the setup\n"
        f"  {me}{flag} serve    start the gateway, then open the address it prints to chat with Study Buddy\n"
        f"  {me}{flag} chat     talk to Study Buddy in this terminal\n\n"
        f"Edit {path} to add partners and chat apps (docs/operation.md explains every setting)."
    )


def _invoked_as() -> str:
    """How to run this same command again from here: ``partners`` when the shell finds it (an
    activated venv), else the path it was started by (``.venv/bin/partners`` in a new shell)."""
    import shutil

    started = Path(sys.argv[0])
    if started.name != "partners" or not started.is_file():
        return "partners"
    found = shutil.which("partners")
    if found is not None and Path(found).resolve() == started.resolve():
        return "partners"
    try:
        return str(started.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(started)


# --------------------------------------------------------------------------- serve


def _configure_logging(level: str) -> None:
    """Log to stderr at ``level``, every line scrubbed of the secrets the process holds (gateway.redaction)."""
    import logging

    from gateway.redaction import protect_logging

    protect_logging()
    logging.basicConfig(level=level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per HTTP call drowns the gateway's own


class PreflightError(click.ClickException):
    """``serve`` cannot start as configured; the message names the problem and its fix."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        # click annotates exit_code a ClassVar, yet reads it from the exception it caught: per instance works
        self.exit_code = exit_code  # type: ignore[misc]

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def _preflight(config: Config) -> None:
    """Stop on a broken account (ConfigError) or one whose settings cannot work (an empty token, a
    placeholder host: the shape problems doctor --offline reports), and on a port another program,
    another gateway or this data dir's own running gateway holds; then warn about channels and
    knowledge bases that cannot run here."""
    from channels.registry import load_channel
    from gateway.configfile import account_enabled, validate_account
    from gateway.core.errors import ChannelUnavailable
    from gateway.core.probes import Gravity
    from gateway.doctor import PortHolder, Severity, check_knowledge, check_stores, client_host, port_holder

    for result in check_stores(config, thorough=False):  # a damaged file: one line and its fix, not a traceback later
        if result.severity is Severity.ERROR:
            raise PreflightError(f"{result.message} (fix: {result.fix})")
    warnings: list[str] = []
    for channel, accounts in config.channels.items():
        for account in accounts:
            if not account_enabled(config, channel, account):
                continue
            try:
                cls = load_channel(channel)
            except ChannelUnavailable as error:
                warnings.append(f"warning: {channel}/{account} will not run: {error}")
                cls = None
            settings = validate_account(config, channel, account, cls.config_model if cls else None)
            for problem in cls.check(settings) if cls else ():
                if problem.gravity is Gravity.ERROR:
                    raise PreflightError(f"{channel}/{account}: {problem.message} (fix: {problem.fix})", EXIT_CONFIG)
                warnings.append(f"warning: {channel}/{account}: {problem.message} (fix: {problem.fix})")
    for result in check_knowledge(config):  # a knowledge base costs its documents, not the gateway: warn, go on
        if result.severity is not Severity.OK:
            warnings.append(f"warning: {result.name}: {result.message} (fix: {result.fix})")
    holder, result = port_holder(config)
    if holder is PortHolder.THIS_GATEWAY:
        where = f"http://{client_host(config.http.host)}:{config.http.port}"
        raise PreflightError(f"a Partners Gateway on this data dir is already running at {where} (fix: {result.fix})")
    if holder is not PortHolder.FREE:
        raise PreflightError(f"{result.message} (fix: {result.fix})")
    for warning in warnings:
        click.echo(warning, err=True)


def ready_message(config: Config, url: str) -> str:
    url = url if url.endswith("/") else url + "/"
    names = [
        config.partner(b.partner).name
        for b in config.bindings
        if b.channel == "webchat" and b.account == "default" and b.chat is None
    ]
    if names:
        return f"Partners Gateway is running: open {url} to chat with {' and '.join(names)}"
    return f"Partners Gateway is running at {url}"


def _check_personas(config: Config) -> None:
    """Stop, with doctor's error and fix, on a partner whose persona does not load (a misspelt folder)."""
    from personas.loader import load_partner_personas

    load_partner_personas(config)


@cli.command()
@click.option("--host", help="Listen on this address (overrides http.host).")
@click.option("--port", type=click.IntRange(0, 65535), help="Listen on this port, 0 for any free one (overrides http.port).")
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning", "error"]))
@click.pass_context
def serve(ctx: click.Context, host: str | None, port: int | None, log_level: str) -> None:
    """Run the gateway and its web server until Ctrl-C or SIGTERM."""
    import asyncio
    import errno

    config = _load(ctx)
    _check_personas(config)
    if config.source is None:
        click.echo(_embedded_note(config))
    overrides = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    if overrides:
        config = config.model_copy(update={"http": config.http.model_copy(update=overrides)})
    _configure_logging(log_level)
    _preflight(config)
    from gateway.app import serve as serve_gateway

    try:
        asyncio.run(serve_gateway(config, on_ready=lambda url: click.echo(ready_message(config, url))))
    except KeyboardInterrupt:
        pass
    except OSError as error:  # a busy port, an unwritable data dir: the operator's to fix, not a crash
        if error.errno == errno.EADDRINUSE:  # taken since the preflight looked: say by whom, as it would have
            from gateway.doctor import check_port

            taken = check_port(config)
            click.echo(f"error: {taken.message} (fix: {taken.fix or 'pick another port with --port or http.port'})", err=True)
        else:
            click.echo(f"error: {error.strerror or error} (fix: `partners doctor` checks the setup)", err=True)
        ctx.exit(1)
    click.echo("Partners Gateway stopped.")


# --------------------------------------------------------------------------- chat


def chat_config(config: Config, partner_id: str, user: str) -> Config:
    """The loaded config reduced to one console account bound to one partner, same data dir."""
    from gateway.core.config import Binding

    return config.model_copy(update={
        "channels": {"console": {"default": {"access": {"dm": "allowlist", "allow_from": [user]}}}},
        "bindings": (Binding(partner=partner_id, channel="console", account="default"),),
    })


ANSWER_POLL_S = 0.05


async def _answered(gateway: Any, channel: str, account: str) -> None:
    """Return once nothing typed on ``channel/account`` waits for a turn and no answer waits to be shown.

    The store says so: a message is ``pending`` until its answer is in the outbox (one
    transaction), and the answer is open until the console printed it.
    """
    import asyncio

    key = f"{channel}:{account}"
    while True:
        depths = await gateway.store.queue_depths()
        if not depths.inbound_pending.get(key) and not depths.outbox_open.get(key):
            return
        await asyncio.sleep(ANSWER_POLL_S)


async def _chat(config: Config) -> None:
    from channels.console import ConsoleChannel
    from gateway.app import Gateway

    gateway = Gateway(config)
    await gateway.start()
    try:
        channel = gateway.channel("console", "default")
        if not isinstance(channel, ConsoleChannel):
            raise click.ClickException("the console channel did not start; run `partners doctor`")
        await channel.finished.wait()
        if channel.input_ended:  # piped input ran out: print every answer before leaving (/quit leaves at once)
            await _answered(gateway, "console", "default")
    finally:
        await gateway.stop()


@cli.command()
@click.option("--partner", "partner_id", help="Partner id (default: the first partner in the config).")
@click.pass_context
def chat(ctx: click.Context, partner_id: str | None) -> None:
    """Talk to a partner in this terminal (type /quit or press Ctrl-D to leave)."""
    import asyncio

    from channels.console import os_user

    config = _load(ctx)
    if not config.partners:
        raise click.ClickException("no partner is configured; add one under partners: (see `partners init`)")
    _check_personas(config)
    try:
        partner = config.partner(partner_id) if partner_id else config.partners[0]
    except KeyError:
        known = ", ".join(p.id for p in config.partners)
        raise click.BadParameter(f"no partner {partner_id!r} (known: {known})", param_hint="--partner") from None
    _configure_logging("warning")
    click.echo(f"Talking to {partner.name} ({partner.id}). Type /quit or press Ctrl-D to leave.")
    try:
        asyncio.run(_chat(chat_config(config, partner.id, os_user())))
    except KeyboardInterrupt:
        click.echo()


# --------------------------------------------------------------------------- channels


@cli.command(cls=click.Command)  # reads no config, so takes no --config
def channels() -> None:
    """List every channel and whether it can run here."""
    from channels.registry import list_channels

    rows = [(c.name, c.title, "yes" if c.available else "no", c.reason) for c in list_channels()]
    click.echo(_table(("CHANNEL", "TITLE", "AVAILABLE", "REASON"), rows))


# --------------------------------------------------------------------------- status


def base_url(config: Config) -> str:
    from gateway.doctor import client_host

    if config.http.public_url:
        return config.http.public_url.rstrip("/")
    return f"http://{client_host(config.http.host)}:{config.http.port}"


def format_status(report: StatusReport, url: str) -> str:
    header = (
        f"Partners Gateway {report.version} at {url}, running since {report.started_at:%Y-%m-%d %H:%M:%S %Z}".rstrip()
        + f"\nresponder: {report.responder}; partners: {', '.join(report.partners) or 'none'}"
    )
    rows = [
        (a.channel, a.account, a.state, str(a.restarts), str(a.inbound_pending), str(a.inbound_held), str(a.outbox_open), a.reason)
        for a in report.accounts
    ]
    headers = ("CHANNEL", "ACCOUNT", "STATE", "RESTARTS", "PENDING", "HELD", "OUTBOX", "REASON")
    table = _table(headers, rows) if rows else "no channel accounts running"
    lines = [header, "", table]
    if report.unavailable:
        lines += ["", "not running:"] + [f"  {u.channel}/{u.account}: {u.reason}" for u in report.unavailable]
    if report.models:
        models = [
            (m.partner, m.model or "-", m.backup or "-", m.state, f"{m.since:%Y-%m-%d %H:%M:%S %Z}".strip() if m.since else "-",
             f"{m.kind}: {m.reason}" if m.kind else m.reason)
            for m in report.models
        ]
        lines += ["", _table(("PARTNER", "MODEL", "BACKUP", "STATE", "SINCE", "REASON"), models)]
    if report.http is not None:
        h = report.http
        lines += ["", f"http: {h.connections} of {h.max_connections} connections, {h.streams} of {h.max_streams} streams "
                      f"({h.max_streams_per_address} per address); refused {h.refused_connections} connections, "
                      f"{h.refused_streams} streams; {h.header_timeouts} header timeouts ({h.header_timeout_s:g} s); "
                      f"open files limit {h.open_files_limit if h.open_files_limit is not None else '-'}"]
    return "\n".join(lines)


STATUS_PROBLEMS_EXIT = 3
"""``partners status`` exit status while an account or a model is in error (1: no gateway answers; 2: bad config)."""


@cli.command()
@click.option("--url", help="The gateway's address (default: http.public_url, else http://host:port from the config).")
@click.pass_context
def status(ctx: click.Context, url: str | None) -> None:
    """Show what the running gateway is doing: accounts, models, states, queue depths.

    Exit 0 when all is well, 3 while an account or a model is in error, 1 when no gateway answers."""
    import httpx
    from pydantic import ValidationError

    from gateway.status import StatusReport

    url = (url or base_url(_load(ctx, resolve_secrets=False))).rstrip("/")
    try:
        response = httpx.get(f"{url}/status", timeout=5.0)
    except httpx.HTTPError:
        click.echo(f"No Partners Gateway is answering at {url} (start one with `partners serve`).", err=True)
        ctx.exit(1)
    if response.status_code != 200:
        click.echo(f"{url}/status answered HTTP {response.status_code}; is a Partners Gateway running there?", err=True)
        ctx.exit(1)
    try:
        report = StatusReport.model_validate_json(response.content)
    except ValidationError:
        click.echo(f"{url}/status did not answer like a Partners Gateway.", err=True)
        ctx.exit(1)
    click.echo(format_status(report, url))
    problems = report.problems()
    if problems:
        click.echo("\nneeds attention:\n" + "\n".join(f"  {line}" for line in problems), err=True)
        ctx.exit(STATUS_PROBLEMS_EXIT)


# --------------------------------------------------------------------------- doctor


@cli.command()
@click.option("--offline", is_flag=True, help="Check only the shape of the settings; ask no platform and no model.")
@click.pass_context
def doctor(ctx: click.Context, offline: bool) -> None:
    """Check the config, data dir, port, channels, bindings and models; print each problem with its fix.

    Without --offline, each channel account and each partner's model is asked whether its settings work
    (Telegram getMe, an IMAP and SMTP login, Matrix whoami, a one-token model request), all at once."""
    from gateway.defaults import load
    from gateway.doctor import Severity, run_checks

    results = run_checks(lambda: load(ctx.obj), offline=offline)
    for result in results:
        click.echo(f"{result.severity.value:<6} {result.name}: {result.message}")
        if result.fix and result.severity is not Severity.OK:
            click.echo(f"       fix: {result.fix}")
    errors = sum(r.severity is Severity.ERROR for r in results)
    warnings = sum(r.severity is Severity.WARN for r in results)
    click.echo(f"\n{errors} error(s), {warnings} warning(s)")
    if errors:
        ctx.exit(1)


# --------------------------------------------------------------------------- pairing


@cli.group()
def pairing() -> None:
    """Let learners in: list, approve or deny the pairing codes they were given."""


def _with_store(ctx: click.Context, action: Any) -> Any:
    """Run ``action(store)`` against the gateway's database, or return None if there is none yet."""
    import asyncio

    from gateway.store.sqlite import SqliteStore

    config = _load(ctx, resolve_secrets=False)
    if not config.database_path.exists():
        return None

    async def run() -> Any:
        store = SqliteStore(config.database_path)
        await store.open()
        try:
            return await action(store)
        finally:
            await store.close()

    return asyncio.run(run())


@pairing.command("list")
@click.pass_context
def pairing_list(ctx: click.Context) -> None:
    """Show the codes waiting for approval."""
    import time

    requests = _with_store(ctx, lambda store: store.pairing_list()) or []
    if not requests:
        click.echo("No pairing codes are waiting.")
        return
    now = time.time()
    rows = [(r.code, r.channel, r.account, r.user, r.display_name, _duration(r.expires_at - now)) for r in requests]
    click.echo(_table(("CODE", "CHANNEL", "ACCOUNT", "USER", "NAME", "EXPIRES IN"), rows))


def _resolve(ctx: click.Context, code: str, approve: bool) -> None:
    request = _with_store(ctx, lambda store: store.pairing_resolve(code, approve))
    if request is None:
        click.echo(
            f"error: no pending pairing code {code.strip().upper()}: it is unknown, already used, or expired "
            "(codes last pairing_ttl_s, 1 hour by default). `partners pairing list` shows the live ones; "
            "a learner whose code expired gets a new one by writing again.",
            err=True,
        )
        ctx.exit(1)
    who = f"{request.display_name} ({request.user})" if request.display_name else request.user
    if approve:
        click.echo(f"Approved {who} on {request.channel}/{request.account}. Their waiting messages will be answered.")
    else:
        click.echo(f"Denied {who} on {request.channel}/{request.account}. Their waiting messages are dropped.")


@pairing.command("approve")
@click.argument("code")
@click.pass_context
def pairing_approve(ctx: click.Context, code: str) -> None:
    """Let the sender of CODE talk to the partner."""
    _resolve(ctx, code, True)


@pairing.command("deny")
@click.argument("code")
@click.pass_context
def pairing_deny(ctx: click.Context, code: str) -> None:
    """Refuse the sender of CODE; their held messages are dropped."""
    _resolve(ctx, code, False)


import gateway.cli_kb  # noqa: E402 -- registers `partners kb` (imports only click until a kb command runs)
import gateway.cli_memory  # noqa: E402 -- registers `partners memory` and `partners people` (likewise)
import gateway.cli_roster  # noqa: E402,F401 -- registers `partners people list` and `partners conversations`


def main() -> None:
    cli(prog_name="partners")


if __name__ == "__main__":  # python -m gateway.cli, for a checkout without the console script
    main()
