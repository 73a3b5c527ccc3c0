"""``partners console``: who may sign in to the teacher console (``/console`` on the gateway's port).

``add-user`` is the way in that needs no browser: the first administrator on a server someone
set up, or a teacher's account.  A teacher is linked to the partners they own by their account as
the config's ``owners`` name it (``--teacher telegram:12345``), the identity ``http.admin_tokens``
use too; an id no partner lists is refused, since that teacher would see nothing.  The password is
asked twice without echo, or read from stdin (``--password-stdin``) by a script; it is never an
argument, which every user of the machine could read in the process list.
"""

from __future__ import annotations

import sys

import click

from gateway.cli.group import cli, config_of, format_table, on_store


@cli.group()
def console() -> None:
    """Teacher console accounts: add them, list them."""


def _read_password(from_stdin: bool) -> str:
    import getpass

    from gateway.console.passwords import MAX_CHARS, MIN_CHARS, acceptable

    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Password, again: ") != password:
            raise click.ClickException("the two passwords are not the same; nothing was saved")
    if not acceptable(password):
        raise click.ClickException(f"a password needs {MIN_CHARS} to {MAX_CHARS} characters; nothing was saved")
    return password


@console.command("add-user")
@click.argument("username")
@click.option("--role", required=True, type=click.Choice(["administrator", "teacher"]),
              help="administrator: sees every partner; teacher: only the partners they own.")
@click.option("--teacher", "teacher", metavar="CHANNEL:USER",
              help="A teacher's account as the partners' owners name it (telegram:12345); required for --role teacher.")
@click.option("--name", "display_name", help="How the console greets them (default: the username).")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of stdin (for scripts).")
@click.pass_context
def add_user(ctx: click.Context, username: str, role: str, teacher: str | None, display_name: str | None,
             password_stdin: bool) -> None:
    """Create a console account USERNAME; asks for its password twice."""
    import time

    from gateway.console.pages import USERNAME
    from gateway.console.passwords import hash_password
    from gateway.core.config import teacher_account
    from gateway.store.console import ConsoleUser, Role, normal_username

    name = normal_username(username)
    if not USERNAME.fullmatch(name):
        raise click.ClickException(f"{username!r} cannot be a username: use 1 to 64 letters, digits, dots, dashes or underscores")
    chosen = Role(role)
    if chosen is Role.TEACHER:
        if teacher is None:
            raise click.ClickException("a teacher needs --teacher CHANNEL:USER, their account as the partners' owners name it")
        try:
            teacher_account(teacher)
        except ValueError as error:
            raise click.ClickException(str(error)) from None
        config = config_of(ctx, resolve_secrets=False)
        owned = [p.id for p in config.partners if p.owned_by(teacher)]
        if not owned:
            raise click.ClickException(f"no partner lists {teacher} among its owners, so this teacher would see nothing; "
                                       "add it under a partner's owners in the config, or check the spelling")
    elif teacher is not None:
        raise click.ClickException("--teacher is for --role teacher: an administrator sees every partner")
    password = _read_password(password_stdin)
    user = ConsoleUser(name, (display_name or name).strip()[:100], chosen, teacher, hash_password(password), time.time())

    added = on_store(config_of(ctx, resolve_secrets=False), lambda store: store.add_console_user(user))
    if not added:
        raise click.ClickException(f"there is already a console user {name}; nothing was changed")
    scope = "every partner" if chosen is Role.ADMINISTRATOR else f"the partners {teacher} owns"
    click.echo(f"Added {chosen.value} {name}: they sign in at /console/login and see {scope}.")


@console.command("users")
@click.pass_context
def users(ctx: click.Context) -> None:
    """List the console's accounts."""
    import time

    found = on_store(config_of(ctx, resolve_secrets=False), lambda store: store.console_users())
    if not found:
        click.echo("The console has no user yet: `partners console add-user NAME --role administrator`, "
                   "or open the link `partners serve` prints.")
        return
    rows = [(u.username, u.display_name, u.role.value, u.teacher or "-", "disabled" if u.disabled else "active",
             time.strftime("%Y-%m-%d", time.localtime(u.created_at))) for u in found]
    click.echo(format_table(("USERNAME", "NAME", "ROLE", "TEACHER", "STATE", "CREATED"), rows))


@console.command("new-key")
def new_key() -> None:
    """Print a fresh PARTNERS_SECRET_KEY: the key that seals the channel accounts added in the console."""
    from gateway.secretbox import KEY_ENV
    from gateway.secretbox import new_key as make

    click.echo(make())
    click.echo(f"Set it as {KEY_ENV} in the gateway's environment and keep a copy: without it the accounts "
               "added in the console cannot be opened.", err=True)
