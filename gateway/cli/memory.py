"""``partners memory`` and ``partners people``: a teacher's controls over what partners remember.

``people list`` and ``conversations list`` live in :mod:`gateway.cli.roster`.

Registers itself on the ``partners`` group (:mod:`gateway.cli.group`) when :mod:`gateway.cli` imports it; like
it, this module imports only click, and each command imports the memory code
when it runs.  Every command works on the data dir of the loaded config
(``memory.db`` and ``brain.db``) and names a partner, whose teacher scope it
acts in (its first owner; see ``brain.memory.scopes``).  The same operations
are Python methods of ``brain.memory.guarded.GuardedControls`` (built by ``brain.factory``), returning
plain data, for a web console's JSON API to call.

A learner is named by an identity, ``CHANNEL:ACCOUNT:USER`` (``telegram:default:12345``),
or -- where the person must already exist -- by a platform user id or a display name
(:func:`brain.memory.roster.matching`; several matches are an error listing them);
a group by ``CHANNEL:ACCOUNT:CHAT``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from gateway.cli.group import cli, config_of

if TYPE_CHECKING:  # pragma: no cover - typing only
    from brain.memory.guarded import GuardedControls
    from brain.memory.scopes import Identity, Scope
    from gateway.core.config import Config, PartnerConfig

T = TypeVar("T")


def _partner(config: Config, partner_id: str) -> PartnerConfig:
    try:
        return config.partner(partner_id)
    except KeyError:
        known = ", ".join(p.id for p in config.partners) or "none"
        raise click.BadParameter(f"no partner {partner_id!r} (known: {known})", param_hint="--partner") from None


def _identity(text: str, hint: str) -> Identity:
    from brain.memory.scopes import Identity

    try:
        return Identity.parse(text)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint=hint) from None


def _controlled(ctx: click.Context, partner_id: str, work: Callable[[GuardedControls, PartnerConfig], Coroutine[Any, Any, T]],
                *, rewrites: bool = False, files: bool = False) -> T:
    """Run ``work`` against the config's memory and session log, closing both afterwards.

    ``rewrites``: the work moves or erases a learner's data, so no gateway may be running on the
    data directory (a turn in progress would finish writing under the old key).  ``files``: the work
    may erase files learners sent, so the gateway's store and blob folder are lent to the controls
    (as the running gateway lends them to the brain)."""
    if rewrites:
        from gateway.datadir import DataDirBusy, exclusive

        config = config_of(ctx, resolve_secrets=False)
        try:
            with exclusive(config.data_dir):
                return _controlled(ctx, partner_id, work, files=files)
        except DataDirBusy:
            raise click.ClickException(
                f"a gateway is running on {config.data_dir}: stop it first, or let the learner use "
                "/link, /unlink or /forget in chat, which the running gateway handles safely"
            ) from None
    from brain.factory import build_controls
    from brain.memory.guarded import TurnRunning

    config = config_of(ctx, resolve_secrets=False)
    partner = _partner(config, partner_id)
    built = build_controls(config)  # the brain's own wiring (brain.factory), without a model or turns

    async def run() -> T:
        try:
            return await (_with_files(config, built.memory, partner, work) if files else work(built.memory, partner))
        finally:
            await built.close()

    try:
        return asyncio.run(run())
    except TurnRunning as error:  # only this process's own callers hold its locks, so this is not expected
        raise click.ClickException(str(error)) from None


async def _with_files(config: Config, controls: GuardedControls, partner: PartnerConfig,
                      work: Callable[[GuardedControls, PartnerConfig], Coroutine[Any, Any, T]]) -> T:
    from gateway.blob_gc import BlobCollector
    from gateway.blobs import LocalBlobs
    from gateway.store.sqlite import SqliteStore

    if not config.database_path.exists():  # no gateway ever ran here: it received no files
        return await work(controls, partner)
    store = SqliteStore(config.database_path)
    await store.open()
    try:
        controls.controls.files = BlobCollector(store, LocalBlobs(config.data_dir / "blobs"),
                                                config.pipeline.blob_retention_s)
        return await work(controls, partner)
    finally:
        await store.close()


async def _person(controls: GuardedControls, partner: PartnerConfig, text: str) -> str:
    """The person ``text`` names in the partner's teacher scope: an identity, a platform user id or a name.

    Two people answering to the same name or user id (two Anns, one id on two chat
    apps) are listed, never guessed between."""
    from brain.memory.roster import matching
    from brain.memory.scopes import teacher_of

    found = matching(await controls.people(), text, teacher_of(partner))
    if not found:
        raise click.ClickException(
            f"{text} has not written to {partner.id} or its teacher's other partners yet "
            "(`partners people list` shows who has)"
        )
    if len(found) > 1:
        listed = "; ".join(", ".join(_account_label(a) for a in person.accounts) for person in found)
        raise click.ClickException(
            f"{text!r} names {len(found)} learners of {partner.id}'s teacher: {listed}. "
            "Name one by an identity, CHANNEL:ACCOUNT:USER"
        )
    return found[0].id


def _account_label(account: Any) -> str:
    return f"{account.identity}" + (f" ({account.display_name})" if account.display_name else "")


async def _scope(controls: GuardedControls, partner: PartnerConfig, who: dict[str, Any]) -> Scope:
    from brain.memory.scopes import (
        Scope,
        ScopeKind,
        learner_scope,
        notes_scope,
        teacher_of,
    )

    teacher = teacher_of(partner)
    chosen = [name for name in ("learner", "group", "notes", "owner") if who.get(name)]
    if len(chosen) != 1:
        raise click.UsageError("name exactly one of --learner, --group, --notes or --owner")
    if who.get("learner"):
        return learner_scope(teacher, await _person(controls, partner, who["learner"]))
    if who.get("group"):
        group = _identity(who["group"], "--group")
        return Scope(ScopeKind.GROUP, teacher, str(group))
    if who.get("notes"):
        return notes_scope(partner)
    return Scope(ScopeKind.OWNER, teacher, "")


def _scope_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed([
        click.option("--partner", "partner_id", required=True, help="The partner (its teacher's scope is used)."),
        click.option("--learner", help="A learner: an identity CHANNEL:ACCOUNT:USER, a platform user id, or a name."),
        click.option("--group", help="A group chat: CHANNEL:ACCOUNT:CHAT."),
        click.option("--notes", is_flag=True, help="The teacher's notes for this partner."),
        click.option("--owner", is_flag=True, help="What the partners remember about the teacher."),
    ]):
        command = option(command)
    return command


@cli.group()
def memory() -> None:
    """See, export, delete or edit what partners remember about a learner or a group."""


@memory.command("show")
@_scope_options
@click.option("--no-history", is_flag=True, help="Leave the conversations out.")
@click.pass_context
def memory_show(ctx: click.Context, partner_id: str, no_history: bool, **who: Any) -> None:
    """Print the notes (with footnotes), facts, preferences and conversations as Markdown."""

    async def work(controls: GuardedControls, partner: PartnerConfig) -> str:
        return await controls.markdown(await _scope(controls, partner, who), history=not no_history)

    click.echo(_controlled(ctx, partner_id, work))


@memory.command("export")
@_scope_options
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file instead of stdout.")
@click.pass_context
def memory_export(ctx: click.Context, partner_id: str, output: Path | None, **who: Any) -> None:
    """Everything kept, as JSON: notes with footnote provenance, facts, preferences, history."""

    async def work(controls: GuardedControls, partner: PartnerConfig) -> dict[str, Any]:
        return await controls.export(await _scope(controls, partner, who))

    text = json.dumps(_controlled(ctx, partner_id, work), indent=2, ensure_ascii=False)
    if output is None:
        click.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
        click.echo(f"Wrote {output}.")


@memory.command("delete")
@_scope_options
@click.option("--keep-history", is_flag=True, help="Delete the memory only, not the conversations.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def memory_delete(ctx: click.Context, partner_id: str, keep_history: bool, yes: bool, **who: Any) -> None:
    """Delete the notes, facts and preferences (and, unless --keep-history, the conversations)."""
    if not yes:
        click.confirm("This cannot be undone. Delete?", abort=True)

    async def work(controls: GuardedControls, partner: PartnerConfig) -> dict[str, int]:
        return await controls.delete(await _scope(controls, partner, who), history=not keep_history)

    counts = _controlled(ctx, partner_id, work, rewrites=True)
    click.echo("Deleted " + ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in counts.items()) + ".")


@memory.command("edit")
@_scope_options
@click.option("--file", "path", required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Markdown that replaces the notes; footnotes [^n] kept from the old notes keep their provenance.")
@click.pass_context
def memory_edit(ctx: click.Context, partner_id: str, path: Path, **who: Any) -> None:
    """Replace the consolidated notes (or, with --notes, the partner notes) with a file's Markdown."""
    markdown = path.read_text(encoding="utf-8")

    async def work(controls: GuardedControls, partner: PartnerConfig) -> int:
        doc = await controls.edit(await _scope(controls, partner, who), markdown)
        return len(doc.footnotes)

    kept = _controlled(ctx, partner_id, work, rewrites=True)
    click.echo(f"Notes replaced ({kept} footnote(s) kept).")


# --------------------------------------------------------------------------- people


@cli.group()
def people() -> None:
    """Who talks to the partners: list people, link a learner's identities into one person, or undo it."""


@people.command("show")
@click.argument("learner")
@click.option("--partner", "partner_id", required=True, help="The partner (its teacher's scope is used).")
@click.pass_context
def people_show(ctx: click.Context, learner: str, partner_id: str) -> None:
    """List every identity linked to LEARNER's person (an identity, a platform user id or a name)."""

    async def work(controls: GuardedControls, partner: PartnerConfig) -> list[str]:
        return [_account_label(a) for a in await controls.accounts(await _person(controls, partner, learner))]

    click.echo("\n".join(_controlled(ctx, partner_id, work)))


@people.command("link")
@click.argument("keep")
@click.argument("other")
@click.option("--partner", "partner_id", required=True, help="The partner (its teacher's scope is used).")
@click.pass_context
def people_link(ctx: click.Context, keep: str, other: str, partner_id: str) -> None:
    """Make OTHER's person part of KEEP's: memory and history follow the learner on both."""
    first, second = _identity(keep, "KEEP"), _identity(other, "OTHER")

    async def work(controls: GuardedControls, partner: PartnerConfig) -> bool:
        from brain.memory.scopes import teacher_of

        return (await controls.link(teacher_of(partner), first, second)).merged

    merged = _controlled(ctx, partner_id, work, rewrites=True)
    click.echo(f"Linked {second} to {first}." if merged else f"{first} and {second} were already linked.")


@people.command("unlink")
@click.argument("identity")
@click.option("--partner", "partner_id", required=True, help="The partner (its teacher's scope is used).")
@click.pass_context
def people_unlink(ctx: click.Context, identity: str, partner_id: str) -> None:
    """Give IDENTITY a fresh person; what was remembered so far stays with the others."""
    who = _identity(identity, "IDENTITY")

    async def work(controls: GuardedControls, partner: PartnerConfig) -> bool:
        from brain.memory.scopes import teacher_of

        return await controls.unlink(teacher_of(partner), who) is not None

    if _controlled(ctx, partner_id, work, rewrites=True):
        click.echo(f"Unlinked {who}: it starts fresh; the memory stays with the identities it was linked to.")
    else:
        click.echo(f"{who} is not linked to another identity.", err=True)
        ctx.exit(1)


@people.command("forget")
@click.argument("learner")
@click.option("--partner", "partner_id", required=True, help="The partner (its teacher's scope is used).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def people_forget(ctx: click.Context, learner: str, partner_id: str, yes: bool) -> None:
    """Erase LEARNER's person: every identity, all memory and every conversation (what /forget does)."""
    if not yes:
        click.confirm("This erases the learner on every linked identity and cannot be undone. Go ahead?", abort=True)

    async def work(controls: GuardedControls, partner: PartnerConfig) -> dict[str, int]:
        return await controls.forget(await _person(controls, partner, learner))

    counts = _controlled(ctx, partner_id, work, rewrites=True, files=True)
    click.echo("Erased " + ", ".join(f"{count} {kind.replace('_', ' ')}" for kind, count in sorted(counts.items())) + ".")
