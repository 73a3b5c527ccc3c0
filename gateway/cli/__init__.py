"""The ``partners`` command: the group and its subcommands, each in a module of this package.

Each subcommand module registers itself on the group (:mod:`gateway.cli.group`)
when it is imported; this entry only lists them.  Nothing below imports this
entry back, so adding a subcommand is a new module and one line here.  Like the
group, the subcommand modules import only click until one of their commands runs.
"""

from __future__ import annotations

from gateway.cli import chat, console, kb, login, memory, pairing, roster, serve, status, tokens  # noqa: F401 -- each registers its commands
from gateway.cli.group import cli


def main() -> None:
    cli(prog_name="partners")
