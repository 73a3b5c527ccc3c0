"""`partners kb add|list|search|rm` on the loaded config's data dir, and a kb add reaching a running gateway."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from brain.knowledge.engine import Chunk, Hit
from brain.knowledge.lightrag_engine import indexed_text
from brain.knowledge.service import KnowledgeService
from gateway.cli import cli
from gateway.configfile import load_config
from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[2]


def write_config(folder: Path, model: dict | None = None) -> Path:
    partner = {"id": "tutor", "name": "Tutor", "persona": "study-buddy", **({"model": model} if model else {})}
    path = folder / "partners.yaml"
    path.write_text(yaml.safe_dump({"data_dir": "data", "partners": [partner]}), encoding="utf-8")
    return path


@pytest.fixture
def kb(tmp_path, monkeypatch):
    """Runs `partners -c partners.yaml kb ...` in a folder with a one-partner config."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PARTNERS_CONFIG", raising=False)
    config = write_config(tmp_path)
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(cli, ["-c", str(config), "kb", *map(str, args)], prog_name="partners")

    return run


@pytest.fixture
def course(files):
    return [
        files.pdf("worksheet.pdf", [["Forces push and pull."], ["Friction slows a sliding block."]], title="Unit 3",
                  outline=[("Forces", 0), ("Friction", 1)]),
        files.docx("cells.docx", lambda d: (d.add_heading("Cells", 0), d.add_paragraph("The nucleus holds DNA."))),
        files.text("volcanoes.html", "<title>Volcanoes</title><h1>Volcanoes</h1><p>Magma rises from the mantle.</p>"),
        files.text("rivers.md", "# Rivers\n\nRivers carry sediment to the sea.\n"),
        files.text("glossary.txt", "Erosion: the wearing away of rock."),
    ]


def test_add_list_search_and_remove(kb, course, tmp_path):
    added = kb("add", "tutor", *course)
    assert added.exit_code == 0, added.output
    assert "Adding 5 file(s) to tutor (fts engine)." in added.stdout
    assert "Indexing" in added.stderr  # the progress bar
    assert "added      " in added.stdout and f"{course[0]} (2 passage(s), id worksheet.pdf)" in added.stdout
    assert (tmp_path / "data" / "knowledge" / "tutor" / "catalog.db").is_file()

    again = kb("add", "tutor", course[0])
    assert again.exit_code == 0 and f"unchanged  {course[0]} (2 passage(s), id worksheet.pdf)" in again.stdout

    listed = kb("list", "tutor")
    assert listed.exit_code == 0
    lines = listed.stdout.splitlines()
    assert lines[0] == "tutor: 5 document(s), fts engine"
    assert lines[2].split() == ["ID", "TITLE", "KIND", "PASSAGES", "ADDED"]
    assert [line.split()[0] for line in lines[3:]] == ["cells.docx", "glossary.txt", "rivers.md", "worksheet.pdf", "volcanoes.html"]

    found = kb("search", "tutor", "why does friction slow a block")
    assert found.exit_code == 0
    assert found.stdout.startswith("[1] Unit 3 — Friction (worksheet.pdf p. 2)\n    Friction slows a sliding block.\n")

    notes = kb("search", "tutor", "photosynthesis", "--limit", "1")
    assert notes.stdout.startswith("[1] Photosynthesis (study-buddy/notes/photosynthesis.md)\n")

    removed = kb("rm", "tutor", "worksheet.pdf")
    assert removed.exit_code == 0 and removed.stdout == "Removed worksheet.pdf from tutor.\n"
    assert "friction" not in kb("search", "tutor", "friction sliding block").stdout.casefold().split("(study-buddy")[0]
    gone = kb("rm", "tutor", "worksheet.pdf")
    assert gone.exit_code == 1
    assert "tutor has no document 'worksheet.pdf'; `partners kb list tutor` shows the ids" in gone.stderr


def test_files_that_cannot_be_added_are_named_and_the_command_fails(kb, files):
    good = files.text("ok.md", "# Ok\n\nFine.")
    result = kb("add", "tutor", files.text("sheet.xlsx", "x"), good, files.pdf("locked.pdf", [["x"]], password="pw"))
    assert result.exit_code == 1
    assert "failed     " in result.stdout and "unsupported file type .xlsx" in result.stdout
    assert "locked.pdf is password-protected" in result.stdout
    assert "added      " in result.stdout
    assert "2 of 3 file(s) could not be added." in result.stderr


def test_unknown_partner_and_empty_knowledge(kb, course):
    unknown = kb("add", "nobody", course[0])
    assert unknown.exit_code == 2 and "no partner 'nobody' (known: tutor)" in unknown.stderr
    empty = kb("list", "tutor")
    assert empty.exit_code == 0 and "tutor has no documents yet; add some with `partners kb add tutor FILE...`" in empty.stdout
    nothing = kb("search", "tutor", "zzzxq")
    assert nothing.stdout == "Nothing in tutor's documents or notes matches 'zzzxq'.\n"


def test_lightrag_needs_an_embedding_model_and_engines_do_not_switch_under_documents(kb, course):
    bare = kb("add", "tutor", "--engine", "lightrag", course[0])
    assert bare.exit_code == 2 and "--engine lightrag needs --embedding-model MODEL and --embedding-dimensions N" in bare.stderr
    assert kb("add", "tutor", course[0]).exit_code == 0
    switched = kb("add", "tutor", "--engine", "lightrag", "--embedding-model", "openai/x", "--embedding-dimensions", "8", course[1])
    assert switched.exit_code == 1
    assert "error: partner tutor's 1 document(s) are indexed by the fts engine (fix: remove them first" in switched.stderr


async def test_kb_add_in_another_process_reaches_a_running_gateway(tmp_path, stub, model_settings, lightrag_settings, files):
    """The CLI, as its own process, adds to a lightrag knowledge base a gateway process has open;
    the gateway's next search reloads LightRAG's files and finds the new passage."""
    config_path = write_config(tmp_path, model_settings)
    config = load_config(config_path)
    gateway = KnowledgeService.from_config(config)
    try:
        await gateway.configure("tutor", lightrag_settings(mode="naive", min_similarity=-1.0))
        await gateway.add("tutor", [files.text("forces.md", "# Forces\n\nA push or a pull is a force.\n")])
        assert len(await gateway.search_documents("tutor", "force", 5)) == 1  # LightRAG is open in this process

        rivers = files.text("rivers.md", "# Rivers\n\nRivers carry sediment to the sea.\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "from gateway.cli import main; main()", "-c", str(config_path), "kb", "add", "tutor",
            str(rivers), env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await asyncio.wait_for(process.communicate(), HANG_S)
        assert process.returncode == 0, err.decode()
        assert "Adding 1 file(s) to tutor (lightrag engine)." in out.decode() and "added      " in out.decode()

        documents = await gateway.documents("tutor")
        river_doc = next(d for d in documents if d.doc_id == "rivers.md")
        query = indexed_text(Hit(river_doc, Chunk("rivers.md", 0, "Rivers carry sediment to the sea."), 0.0))
        hits = await gateway.search_documents("tutor", query, 1)
        assert [(h.title, h.citation) for h in hits] == [("Rivers", "rivers.md")]
        rag = await (await gateway.base("tutor")).engine._rag("tutor")
        assert (await rag.doc_status.get_by_ids(["rivers.md#0"]))[0]["status"].endswith("processed")  # reloaded too
    finally:
        await gateway.close()
