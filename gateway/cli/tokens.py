"""``partners console token``: API tokens for a console user's scripts, made, listed and revoked on the server.

The same tokens as the console's ``/console/tokens`` page (ADR 0041): ``create USER NAME`` prints the
token once -- it is kept only as a digest, so nobody can show it again -- and the token acts as USER
(a teacher's sees that teacher's partners only), on the console's JSON API and on ``/api/v1``.
"""

from __future__ import annotations

import click

from gateway.cli.console import console
from gateway.cli.group import config_of, format_table, on_store


@console.group("token")
def token() -> None:
    """API tokens of console users: create, list, revoke."""


@token.command("create")
@click.argument("username")
@click.argument("name")
@click.option("--expires-in-days", type=click.IntRange(1, 3650), help="Stop working after this many days (default: never).")
@click.pass_context
def create(ctx: click.Context, username: str, name: str, expires_in_days: int | None) -> None:
    """Make a token NAME acting as console user USERNAME, and print it (once)."""
    import time

    from pydantic import ValidationError

    from gateway.console.tokens import NewToken, new_token
    from gateway.store.console import normal_username
    from gateway.store.tokens import MAX_TOKENS_PER_USER, ApiToken

    try:
        asked = NewToken(name=name, expires_in_days=expires_in_days)
    except ValidationError:
        raise click.ClickException("a token's name is 1 to 64 characters, without control characters") from None
    token_id, secret = new_token()
    now = time.time()
    made = ApiToken(token_id, normal_username(username), asked.name, now, None,
                    now + expires_in_days * 86400.0 if expires_in_days else None)
    if not on_store(config_of(ctx, resolve_secrets=False), lambda store: store.add_api_token(made, secret)):
        raise click.ClickException(f"no token made: there is no console user {made.username}, "
                                   f"or they hold {MAX_TOKENS_PER_USER} tokens already (`partners console token list`)")
    click.echo(f"Token {token_id} ({asked.name}) acts as {made.username}. It is shown this once; keep it like a password:",
               err=True)
    click.echo(secret)


@token.command("list")
@click.argument("username", required=False)
@click.pass_context
def listing(ctx: click.Context, username: str | None) -> None:
    """List the live tokens (of USERNAME only, if given); never their secrets."""
    import time

    found = on_store(config_of(ctx, resolve_secrets=False), lambda store: store.api_tokens(username))
    if not found:
        click.echo("No API tokens. Make one with `partners console token create USER NAME` or at /console/tokens.")
        return

    def when(at: float | None) -> str:
        return "-" if at is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(at))

    rows = [(t.id, t.username, t.name, when(t.created_at), when(t.last_used_at), when(t.expires_at) if t.expires_at else "never")
            for t in found]
    click.echo(format_table(("ID", "USER", "NAME", "CREATED", "LAST USED", "EXPIRES"), rows))


@token.command("revoke")
@click.argument("token_id", metavar="ID")
@click.pass_context
def revoke(ctx: click.Context, token_id: str) -> None:
    """Revoke token ID (as `list` shows it): it stops working at once."""
    if not on_store(config_of(ctx, resolve_secrets=False), lambda store: store.revoke_api_token(token_id)):
        raise click.ClickException(f"no token {token_id}; `partners console token list` shows them")
    click.echo(f"Revoked token {token_id}.")
