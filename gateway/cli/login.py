"""``partners channels login CHANNEL ACCOUNT``: log an account in that has no secret to write down.

Personal WeChat (``weixin`` with ``kind: ilink``) is the one such account: the
teacher scans a QR code with the WeChat that will speak, and the bot token
that scan brings is kept in the gateway's store for that account -- never in
the config file, never printed.  The terminal shows the QR code itself, drawn
in half-block characters (always, even when the output is not a terminal: it
is about 30 lines, and a log of the login keeps the code that was offered),
then the link it encodes, and each state of the scan.  It also prints the
whole address of the login page a running gateway serves for the account
while it waits (``http.public_url``, else ``http://host:port`` from the
config, then the page's path with the token the gateway keeps in the store):
the page to open on another screen, or to send to the teacher who will scan.
"""

from __future__ import annotations

import click

from gateway.cli.chat import channels
from gateway.cli.group import config_of

SAID = {"wait": "Waiting for the scan…", "scaned": "Scanned. Confirm the login in WeChat on the phone.",
        "confirmed": "Confirmed.", "expired": "That QR code expired; here is a fresh one."}


@channels.command("login")
@click.argument("channel")
@click.argument("account")
@click.pass_context
def channels_login(ctx: click.Context, channel: str, account: str) -> None:
    """Log ACCOUNT of CHANNEL in by QR code (personal WeChat: ``weixin``)."""
    import asyncio

    from channels.weixin.config import IlinkConfig, WeixinConfig
    from channels.weixin.ilink.login import Scan, login
    from channels.weixin.ilink.page import stored_path
    from gateway.app import AccountCursors
    from gateway.cli.status import base_url
    from gateway.configfile import validate_account
    from gateway.core.errors import GatewayError
    from gateway.store.sqlite import SqliteStore

    config = config_of(ctx, resolve_secrets=False)
    if channel != "weixin":
        raise click.UsageError(f"{channel} accounts do not log in by QR code; only weixin (personal WeChat) does")
    if account not in config.channels.get("weixin", {}):
        raise click.UsageError(f"no weixin account {account!r} in the config; add channels.weixin.{account} first")
    settings = validate_account(config, "weixin", account, WeixinConfig)
    if not isinstance(settings, IlinkConfig):
        raise click.UsageError(f"weixin/{account} is not personal WeChat (kind: ilink): it needs no login")

    page: list[str] = []  # the login page's path, read from the store before the first code is shown

    def show(link: str) -> None:
        from channels.weixin.ilink.qr import terminal

        click.echo("Scan this QR code with the WeChat that will speak for the partner:")
        click.echo(terminal(link))
        click.echo(f"or open this link on the phone: {link}")
        if page and page[0]:
            click.echo(f"The running gateway shows a code on its login page too: {base_url(config)}{page[0]}")
        else:
            click.echo("(A running gateway shows a code on its login page while the account waits for a login; "
                       "run this command again then to see its address.)")

    def said(state: Scan) -> None:
        click.echo(SAID.get(state.value, state.value))

    async def run() -> str:
        config.database_path.parent.mkdir(parents=True, exist_ok=True)
        store = SqliteStore(config.database_path)
        await store.open()
        try:
            cursors = AccountCursors(store, "weixin", account)
            page.append(await stored_path(cursors, account) or "")
            session = await login(settings, cursors, account=account, show=show, said=said)
            return session.bot_id
        finally:
            await store.close()

    try:
        bot = asyncio.run(run())
    except GatewayError as error:
        click.echo(f"error: {error}", err=True)
        ctx.exit(1)
    click.echo(f"Logged in weixin/{account} as {bot or 'the bot'}. A running gateway picks it up by itself; "
               "otherwise start it (partners serve).")
