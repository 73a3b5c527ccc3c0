"""``partners kb``: a partner's course material -- add files, list them, search them, remove one.

Registers itself on the ``partners`` group (:mod:`gateway.cli.group`) when :mod:`gateway.cli` imports it; like
it, this module imports only click, and each command imports the knowledge
code (and, for lightrag, LightRAG) when it runs.  Works on the data dir of
the loaded config, so a running gateway sees what is added here at its next
search.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gateway.cli.group import cli, config_of, format_table

if TYPE_CHECKING:  # pragma: no cover - typing only
    from brain.factory import BrainControls
    from brain.knowledge.ingest import Outcome
    from brain.knowledge.service import KnowledgeService
    from gateway.core.config import Config

SHOWN_CHARS = 320


def _partner(config: Config, partner_id: str) -> None:
    try:
        config.partner(partner_id)
    except KeyError:
        known = ", ".join(p.id for p in config.partners) or "none"
        raise click.BadParameter(f"no partner {partner_id!r} (known: {known})", param_hint="PARTNER") from None


def _controls(config: Config) -> BrainControls:
    """The knowledge service as the brain builds it (``brain.factory``: documents and the personas' notes)."""
    from brain.factory import build_controls

    return build_controls(config)


def _run(ctx: click.Context, built: BrainControls, work: Any) -> Any:
    """Run ``work`` (a coroutine) and close what was built; a knowledge error ends the command with status 1."""
    from brain.knowledge.engine import KnowledgeError

    async def run() -> Any:
        try:
            return await work
        finally:
            await built.close()

    try:
        return asyncio.run(run())
    except KnowledgeError as error:
        click.echo(f"error: {error}", err=True)
        ctx.exit(1)


@cli.group()
def kb() -> None:
    """A partner's course material: files it searches and cites (docs/operation.md, Knowledge)."""


# --------------------------------------------------------------------------- add


def _settings_change(service: KnowledgeService, partner: str, engine: str | None, embedding: dict[str, Any]) -> dict | None:
    """The partner's ``knowledge.yaml`` with the command's options applied, or None when none was given."""
    from brain.knowledge.settings import read_raw

    if engine is None and not embedding:
        return None
    raw = dict(read_raw(service.folder(partner)) or {})
    if engine is not None:
        raw["engine"] = engine
    if embedding:
        raw["embedding"] = {**(raw.get("embedding") or {}), **embedding}
    if raw.get("engine") == "lightrag" and not (raw.get("embedding") or {}).get("model"):
        raise click.UsageError("--engine lightrag needs --embedding-model MODEL and --embedding-dimensions N "
                               "(or an `embedding:` section in the partner's knowledge.yaml)")
    return raw


def _describe(outcome: Outcome) -> str:
    document = outcome.document
    if outcome.status == "failed":
        return f"failed     {outcome.path}: {outcome.error}"
    assert document is not None
    where = f"{document.passages} passage(s), id {document.doc_id}"
    return f"{outcome.status:<10} {outcome.path} ({where})"


@kb.command("add")
@click.argument("partner")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--engine", type=click.Choice(["fts", "lightrag"]),
              help="Index with this engine (kept for the partner; default: what it uses, else fts).")
@click.option("--embedding-model", help="lightrag: a litellm embedding model, or local:NAME for one on this machine.")
@click.option("--embedding-dimensions", type=click.IntRange(min=1), help="lightrag: the length of its vectors.")
@click.option("--embedding-api-base", help="lightrag: the embedding endpoint, for a self-hosted or proxy server.")
@click.option("--embedding-api-key", help="lightrag: env:NAME of the variable holding the endpoint's key.")
@click.pass_context
def kb_add(ctx: click.Context, partner: str, files: tuple[Path, ...], engine: str | None, embedding_model: str | None,
           embedding_dimensions: int | None, embedding_api_base: str | None, embedding_api_key: str | None) -> None:
    """Add FILES (Markdown, text, PDF, DOCX, HTML) to PARTNER's knowledge; unchanged files are skipped."""
    config = config_of(ctx, resolve_secrets=False)
    _partner(config, partner)
    embedding = {key: value for key, value in (
        ("model", embedding_model), ("dimensions", embedding_dimensions),
        ("api_base", embedding_api_base), ("api_key", embedding_api_key)) if value is not None}
    built = _controls(config)
    service = built.knowledge
    change = _settings_change(service, partner, engine, embedding)

    async def add() -> list[Outcome]:
        if change is not None:
            await service.configure(partner, change)
        base = await service.base(partner)
        click.echo(f"Adding {len(files)} file(s) to {partner} ({base.settings.engine} engine).")
        def shown(outcome: Outcome | None) -> str | None:
            return outcome.path.name if outcome is not None else None

        with click.progressbar(length=len(files), label="Indexing", show_pos=True, file=sys.stderr,
                               item_show_func=shown) as bar:
            return await service.add(partner, list(files), progress=lambda outcome: bar.update(1, outcome))

    outcomes = _run(ctx, built, add())
    for outcome in outcomes:
        click.echo(_describe(outcome))
    failed = sum(o.status == "failed" for o in outcomes)
    if failed:
        click.echo(f"{failed} of {len(outcomes)} file(s) could not be added.", err=True)
        ctx.exit(1)


# --------------------------------------------------------------------------- list, search, rm


@kb.command("list")
@click.argument("partner")
@click.pass_context
def kb_list(ctx: click.Context, partner: str) -> None:
    """Show PARTNER's documents and the engine that indexes them."""
    import time

    config = config_of(ctx, resolve_secrets=False)
    _partner(config, partner)
    built = _controls(config)
    service = built.knowledge

    async def listed() -> tuple[str, list]:
        documents = await service.documents(partner)
        engine = (await service.base(partner)).settings.engine if documents else ""
        return engine, documents

    engine, documents = _run(ctx, built, listed())
    if not documents:
        click.echo(f"{partner} has no documents yet; add some with `partners kb add {partner} FILE...`.")
        return
    rows = [(d.doc_id, d.title, d.kind, str(d.passages), time.strftime("%Y-%m-%d %H:%M", time.localtime(d.added_at)))
            for d in documents]
    click.echo(f"{partner}: {len(documents)} document(s), {engine} engine\n")
    click.echo(format_table(("ID", "TITLE", "KIND", "PASSAGES", "ADDED"), rows))


@kb.command("search")
@click.argument("partner")
@click.argument("query")
@click.option("--limit", default=5, show_default=True, type=click.IntRange(1, 20), help="Passages to show at most.")
@click.pass_context
def kb_search(ctx: click.Context, partner: str, query: str, limit: int) -> None:
    """Search PARTNER's documents and notes as its knowledge_search tool does, with citations."""
    from brain.notes import excerpt, query_words

    config = config_of(ctx, resolve_secrets=False)
    _partner(config, partner)
    built = _controls(config)
    passages = _run(ctx, built, built.knowledge.search(partner, query, limit))
    if not passages:
        click.echo(f"Nothing in {partner}'s documents or notes matches {query!r}.")
        return
    words = query_words(query)
    for number, passage in enumerate(passages, 1):
        body = excerpt(passage.text, words, SHOWN_CHARS).replace("\n", "\n    ")
        click.echo(f"[{number}] {passage.title} ({passage.source})\n    {body}\n")


@kb.command("rm")
@click.argument("partner")
@click.argument("doc_id")
@click.pass_context
def kb_rm(ctx: click.Context, partner: str, doc_id: str) -> None:
    """Remove document DOC_ID (see `partners kb list`) and its passages from PARTNER's knowledge."""
    config = config_of(ctx, resolve_secrets=False)
    _partner(config, partner)
    built = _controls(config)
    if not _run(ctx, built, built.knowledge.remove(partner, doc_id)):
        click.echo(f"error: {partner} has no document {doc_id!r}; `partners kb list {partner}` shows the ids", err=True)
        ctx.exit(1)
    click.echo(f"Removed {doc_id} from {partner}.")
