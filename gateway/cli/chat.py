"""``partners chat`` and ``partners channels``: talk to a partner in this terminal, and list the chat apps this install can serve
(``partners channels login`` is in :mod:`gateway.cli.login`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from gateway.cli.group import check_personas, cli, config_of, configure_logging, format_table

if TYPE_CHECKING:  # pragma: no cover - typing only
    from gateway.core.config import Config


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

    config = config_of(ctx)
    if not config.partners:
        raise click.ClickException("no partner is configured; add one under partners: (see `partners init`)")
    check_personas(config)
    try:
        partner = config.partner(partner_id) if partner_id else config.partners[0]
    except KeyError:
        known = ", ".join(p.id for p in config.partners)
        raise click.BadParameter(f"no partner {partner_id!r} (known: {known})", param_hint="--partner") from None
    configure_logging("warning")
    click.echo(f"Talking to {partner.name} ({partner.id}). Type /quit or press Ctrl-D to leave.")
    try:
        asyncio.run(_chat(chat_config(config, partner.id, os_user())))
    except KeyboardInterrupt:
        click.echo()


# --------------------------------------------------------------------------- channels


@cli.group(invoke_without_command=True)
@click.pass_context
def channels(ctx: click.Context) -> None:
    """List every channel and whether it can run here; ``channels login`` logs an account in."""
    if ctx.invoked_subcommand is not None:
        return
    from channels.registry import list_channels

    rows = [(c.label, c.title, "yes" if c.available else "no", ", ".join(c.features), c.reason) for c in list_channels()]
    click.echo(format_table(("CHANNEL", "TITLE", "AVAILABLE", "FEATURES", "REASON"), rows))


