"""Passages from blocks, and files into an engine once per version, with progress and per-file errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from brain.knowledge.engine import Chunk, Document, Hit
from brain.knowledge.extract import Block, Extracted
from brain.knowledge.fts import FtsEngine
from brain.knowledge.ingest import MAX_WORDS, Outcome, chunk, doc_id_for, ingest


def words(n: int, word: str = "word") -> str:
    return " ".join([word] * n)


def sentences(n: int, length: int = 10) -> str:
    return " ".join(f"{words(length - 1, 'tok')} end{i}." for i in range(n))


def test_doc_ids_are_the_file_name_as_a_teacher_types_it():
    assert doc_id_for(Path("/x/Unit 3 Worksheet.PDF")) == "unit-3-worksheet.pdf"
    assert doc_id_for(Path("Économie & société.docx")) == "économie-société.docx"
    assert doc_id_for(Path("...")) == "document"


def test_paragraphs_of_a_section_join_up_to_the_limit_and_a_heading_starts_a_new_passage():
    blocks = [Block(words(150), "A"), Block(words(150), "A"), Block(words(150), "A"), Block(words(20), "B")]
    chunks = chunk(Extracted("T", "markdown", blocks), "t.md")
    assert [(c.section, len(c.text.split())) for c in chunks] == [("A", 300), ("A", 150), ("B", 20)]
    assert [c.chunk_id for c in chunks] == ["t.md#0", "t.md#1", "t.md#2"]
    assert chunks[0].text == words(150) + "\n\n" + words(150)


def test_a_long_paragraph_is_cut_at_sentence_ends():
    chunks = chunk(Extracted("T", "text", [Block(sentences(100))]), "t.txt")  # 1,000 words
    assert all(len(c.text.split()) <= MAX_WORDS for c in chunks)
    assert all(c.text.endswith(".") for c in chunks)
    assert " ".join(c.text for c in chunks).split() == sentences(100).split()


def test_a_run_on_sentence_is_cut_by_words():
    chunks = chunk(Extracted("T", "text", [Block(words(1000))]), "t.txt")
    assert [len(c.text.split()) for c in chunks] == [300, 300, 400]  # the last pieces fit together


def test_passages_keep_the_pages_they_span():
    blocks = [Block(words(100), "", 2), Block(words(100), "", 3), Block(words(300), "", 3)]
    chunks = chunk(Extracted("T", "pdf", blocks), "w.pdf")
    assert [(c.page_first, c.page_last, c.pages) for c in chunks] == [(2, 3, "pp. 2–3"), (3, 3, "p. 3")]
    assert Chunk("d", 0, "x").pages == ""


def test_citations_name_the_file_and_page_and_titles_the_section():
    document = Document("w.pdf", "Unit 3", "Worksheet.pdf", "pdf", "0" * 64, 10, 0.0, 1)
    hit = Hit(document, Chunk("w.pdf", 0, "x", "Forces", 3, 3), 1.0)
    assert (hit.title, hit.citation) == ("Unit 3 — Forces", "Worksheet.pdf p. 3")
    untitled = Hit(document, Chunk("w.pdf", 0, "x"), 1.0)
    assert (untitled.title, untitled.citation) == ("Unit 3", "Worksheet.pdf")


# --------------------------------------------------------------------------- adding files


@pytest.fixture
async def engine(tmp_path):
    engine = FtsEngine(tmp_path / "kb" / "catalog.db")
    yield engine
    await engine.close()


async def test_adding_the_same_file_again_is_a_no_op_and_a_changed_one_replaces_its_passages(engine, files):
    path = files.text("plants.md", "# Plants\n\nChlorophyll makes leaves green.\n")
    heard: list[Outcome] = []
    first = await ingest(engine, "tutor", [path], progress=heard.append, clock=lambda: 100.0)
    assert [o.status for o in first] == ["added"] and heard == first
    document = first[0].document
    assert document is not None
    assert (document.doc_id, document.title, document.kind, document.passages) == ("plants.md", "Plants", "markdown", 1)
    assert document.added_at == 100.0 and len(document.sha256) == 64

    again = await ingest(engine, "tutor", [path], clock=lambda: 200.0)
    assert again[0].status == "unchanged" and again[0].document == document

    path.write_text("# Plants\n\nStomata let carbon dioxide in.\n", encoding="utf-8")
    changed = await ingest(engine, "tutor", [path], clock=lambda: 300.0)
    assert changed[0].status == "replaced" and changed[0].document.added_at == 300.0
    assert await engine.search("tutor", "chlorophyll", 5) == []
    assert [h.chunk.text for h in await engine.search("tutor", "stomata", 5)] == ["Stomata let carbon dioxide in."]
    assert [d.doc_id for d in await engine.documents("tutor")] == ["plants.md"]


async def test_a_bad_file_is_reported_and_the_others_go_on(engine, files):
    good = files.text("good.txt", "Rivers flow to the sea.")
    outcomes = await ingest(engine, "tutor", [files.text("bad.xlsx", "x"), good, files.folder / "missing.md",
                                              files.text("empty.txt", "")])
    assert [o.status for o in outcomes] == ["failed", "added", "failed", "failed"]
    assert "unsupported file type .xlsx" in outcomes[0].error
    assert "missing.md: no such file" in outcomes[2].error
    assert "empty.txt is empty" in outcomes[3].error
    assert [d.doc_id for d in await engine.documents("tutor")] == ["good.txt"]


async def test_two_files_with_one_name_in_one_run(engine, files):
    first = files.text("a/notes.md", "# A\n\nAlpha.")
    second = files.text("b/notes.md", "# B\n\nBeta.")
    outcomes = await ingest(engine, "tutor", [first, second])
    assert [o.status for o in outcomes] == ["added", "failed"]
    assert "has the same name" in outcomes[1].error and "rename one" in outcomes[1].error


async def test_documents_are_per_partner(engine, files):
    path = files.text("plants.md", "# Plants\n\nChlorophyll makes leaves green.\n")
    await ingest(engine, "tutor", [path])
    assert await engine.documents("other") == [] and await engine.search("other", "chlorophyll", 5) == []
    assert [o.status for o in await ingest(engine, "other", [path])] == ["added"]  # its own copy
