"""``partners pairing``: the teacher approves or refuses a stranger who asked to talk to a partner."""

from __future__ import annotations

from typing import Any

import click

from gateway.cli.group import cli, config_of, format_duration, format_table, on_store

# --------------------------------------------------------------------------- pairing


@cli.group()
def pairing() -> None:
    """Let learners in: list, approve or deny the pairing codes they were given."""


def _with_store(ctx: click.Context, action: Any) -> Any:
    """Run ``action(store)`` against the gateway's database, or return None if there is none yet."""
    config = config_of(ctx, resolve_secrets=False)
    if config.store is None and not config.database_path.exists():
        return None
    return on_store(config, action)


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
    rows = [(r.code, r.channel, r.account, r.user, r.display_name, format_duration(r.expires_at - now)) for r in requests]
    click.echo(format_table(("CODE", "CHANNEL", "ACCOUNT", "USER", "NAME", "EXPIRES IN"), rows))


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


