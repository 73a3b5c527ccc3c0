"""The fts engine: bm25 ranking with citations, safe queries, removal, persistence."""

from __future__ import annotations

import pytest

from brain.knowledge.catalog import Catalog
from brain.knowledge.engine import Chunk, Document, EngineError
from brain.knowledge.fts import FtsEngine


def document(doc_id: str, title: str, passages: int = 1) -> Document:
    return Document(doc_id, title, doc_id, "pdf", "0" * 64, 100, 1.0, passages)


@pytest.fixture
async def engine(tmp_path):
    engine = FtsEngine(tmp_path / "catalog.db")
    await engine.add("tutor", document("forces.pdf", "Forces", 3), [
        Chunk("forces.pdf", 0, "A push or a pull is a force.", "What is a force", 1, 1),
        Chunk("forces.pdf", 1, "Friction slows a sliding block; friction turns motion into heat.", "Friction", 2, 3),
        Chunk("forces.pdf", 2, "Gravity pulls masses together.", "Gravity", 4, 4),
    ])
    await engine.add("tutor", document("cells.pdf", "Cells"), [Chunk("cells.pdf", 0, "The nucleus holds DNA.", "", 1, 1)])
    yield engine
    await engine.close()


async def test_best_passage_first_with_its_document_and_pages(engine):
    hits = await engine.search("tutor", "why does friction slow things", 5)
    assert [(h.title, h.citation) for h in hits] == [("Forces — Friction", "forces.pdf pp. 2–3")]
    assert hits[0].score > 0


async def test_stems_match_and_limit_holds(engine):
    assert {h.chunk.seq for h in await engine.search("tutor", "pulling", 5)} == {0, 2}  # "pull", "pulls"
    assert len(await engine.search("tutor", "pull friction nucleus", 2)) == 2


@pytest.mark.parametrize("query", ['"unbalanced', "NEAR(friction", "friction AND OR NOT", "title:cells", "*", "(((", "-friction"])
async def test_learner_text_is_never_fts_syntax(engine, query):
    await engine.search("tutor", query, 5)  # no sqlite3.OperationalError


async def test_a_query_of_stopwords_finds_nothing(engine):
    assert await engine.search("tutor", "what is the", 5) == []


async def test_remove_and_documents(engine):
    assert [d.title for d in await engine.documents("tutor")] == ["Cells", "Forces"]
    assert await engine.remove("tutor", "forces.pdf") is True
    assert await engine.remove("tutor", "forces.pdf") is False
    assert await engine.search("tutor", "friction", 5) == []
    assert [d.doc_id for d in await engine.documents("tutor")] == ["cells.pdf"]


async def test_the_index_persists_and_indexes_what_another_engine_stored(tmp_path, engine):
    await engine.close()
    reopened = FtsEngine(tmp_path / "catalog.db")
    assert len(await reopened.search("tutor", "gravity", 5)) == 1
    await reopened.close()

    plain = Catalog(tmp_path / "other.db")  # a catalog written without the FTS5 index (by the lightrag engine)
    plain.put("tutor", document("moon.pdf", "Moon"), [Chunk("moon.pdf", 0, "The moon orbits the earth.")])
    plain.close()
    switched = FtsEngine(tmp_path / "other.db")
    assert [h.citation for h in await switched.search("tutor", "moon orbits", 5)] == ["moon.pdf"]
    await switched.close()


def test_a_file_that_is_not_a_catalog(tmp_path):
    path = tmp_path / "catalog.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(EngineError, match="is not a readable knowledge catalog .*fix: remove the partner's knowledge folder"):
        FtsEngine(path)
