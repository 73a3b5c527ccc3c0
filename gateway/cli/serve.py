"""``partners init`` and ``partners serve``: write a first config, then run the gateway it describes.

``serve`` checks before it binds (:func:`_preflight`): every enabled account's settings, the
stores, the knowledge bases and the personas, so a broken setup stops with its fix, not a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gateway.cli.group import EXIT_CONFIG, check_personas, cli, config_of, configure_logging, embedded_note

if TYPE_CHECKING:  # pragma: no cover - typing only
    from gateway.core.config import Config


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
    another gateway or this data dir's own running gateway holds; then warn about channels,
    accounts added in the console and knowledge bases that cannot run here (a console account's
    problem is its teacher's to fix on the channels page, so it warns and does not stop the rest)."""
    from channels.registry import load_channel
    from gateway.configfile import account_enabled, validate_account
    from gateway.core.errors import ChannelUnavailable
    from gateway.core.probes import Gravity
    from gateway.doctor import (
        PortHolder,
        Severity,
        check_console_accounts,
        check_knowledge,
        check_stores,
        client_host,
        port_holder,
    )

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
    console = check_console_accounts(config)
    if not console.shut:  # shut, the gateway's start stops with one line naming the key's variable
        warnings += [f"warning: {r.name}: {r.message} (fix: {r.fix})" for r in console.results if r.severity is not Severity.OK]
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


def setup_message(link: str) -> str:
    """What ``serve`` prints, once, while the console has no user: the link that makes its first administrator."""
    return (f"The teacher console has no user yet. To create its first administrator, open this link "
            f"(it works once, for 24 hours):\n  {link}\nor run `partners console add-user NAME --role administrator`.")


@cli.command()
@click.option("--host", help="Listen on this address (overrides http.host).")
@click.option("--port", type=click.IntRange(0, 65535), help="Listen on this port, 0 for any free one (overrides http.port).")
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["debug", "info", "warning", "error"]))
@click.pass_context
def serve(ctx: click.Context, host: str | None, port: int | None, log_level: str) -> None:
    """Run the gateway and its web server until Ctrl-C or SIGTERM."""
    import asyncio
    import errno

    config = config_of(ctx)
    check_personas(config)
    if config.source is None:
        click.echo(embedded_note(config))
    overrides = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    if overrides:
        config = config.model_copy(update={"http": config.http.model_copy(update=overrides)})
    configure_logging(log_level)
    _preflight(config)
    from gateway.app import serve as serve_gateway

    try:
        asyncio.run(serve_gateway(config, on_ready=lambda url: click.echo(ready_message(config, url)),
                                  on_setup_link=lambda link: click.echo(setup_message(link))))
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


