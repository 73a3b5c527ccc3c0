"""The ``partners`` group, and what its commands share: the config they run with, tables, durations.

Every subcommand module of :mod:`gateway.cli` registers itself on :data:`cli`
here, so a subcommand imports this module and never the package entry that
lists them (no ``cli`` <-> subcommand cycle).  Start-up time is a feature: this
module imports only click, and every command imports what it needs when it
runs, so ``partners --help`` never loads pydantic, the HTTP stack or a model
client.  A configuration error ends any command with exit status 2 and one
line naming the file, the field and the fix -- never a traceback, never a secret.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # pragma: no cover - typing only
    from gateway.core.config import Config
    from gateway.core.errors import ConfigError
    from gateway.store import Store

T = TypeVar("T")

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


def config_of(ctx: click.Context, *, resolve_secrets: bool = True) -> Config:
    """The config the command runs with.

    ``resolve_secrets=False`` for commands that only read the data dir or the address
    (status, pairing, people, kb...): an unset ``env:`` variable then fails only if
    something uses that secret, so they run without the model's key.
    """
    from gateway.core.config import Secrets
    from gateway.defaults import load

    return load(ctx.obj, secrets=Secrets.RESOLVE if resolve_secrets else Secrets.DEFER)


def on_store(config: Config, action: Callable[[Store], Awaitable[T]]) -> T:
    """Run ``action`` against the gateway's store, opened (made and migrated, if this is the first command
    to need it) for this one command and closed after, so a command never holds the database it shares
    with a running gateway.  The store is the one the config selects (``store:``: SQLite or PostgreSQL)."""
    import asyncio

    from gateway.store.choice import configured_store

    async def run() -> T:
        store = configured_store(config)
        await store.open()
        try:
            return await action(store)
        finally:
            await store.close()

    return asyncio.run(run())


def embedded_note(config: Config) -> str:
    return (
        f"No config file: using the embedded default (Study Buddy on web chat, data in {config.data_dir}). "
        "`partners init` writes a config you can edit."
    )


def format_table(headers: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in (headers, *rows)]
    return "\n".join(lines)


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def configure_logging(level: str) -> None:
    """Log to stderr at ``level``, every line scrubbed of the secrets the process holds (gateway.redaction)."""
    import logging

    from gateway.redaction import protect_logging

    protect_logging()
    logging.basicConfig(level=level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per HTTP call drowns the gateway's own


def check_personas(config: Config) -> None:
    """Stop, with doctor's error and fix, on a partner whose persona does not load (a misspelt folder)."""
    from personas.loader import load_partner_personas

    load_partner_personas(config)


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
