"""KnowledgeService: a partner's documents and its persona's notes, merged, cited, through the knowledge_search tool."""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime

import pytest
import yaml

from brain.knowledge.engine import KnowledgeError
from brain.knowledge.service import KnowledgeService, interleave
from brain.notes import NotesIndex
from brain.tools.base import Citation, ToolContext, ToolServices
from brain.tools.builtin.knowledge import KnowledgeSearchTool
from brain.tools.services import Passage
from gateway.configfile import parse_config
from gateway.core.config import PartnerConfig
from gateway.core.messages import Address, Conversation, ConversationKind, InboundMessage, Sender, Text
from gateway.core.turns import Role, Turn


@pytest.fixture
def config(tmp_path, model_settings):
    return parse_config({
        "data_dir": str(tmp_path / "data"),
        "partners": [
            {"id": "tutor", "name": "Tutor", "persona": "study-buddy"},
            {"id": "graph", "name": "Graph", "persona": "study-buddy", "model": model_settings},
        ],
    })


@pytest.fixture
async def service(config):
    index = NotesIndex()
    service = KnowledgeService.from_config(config, notes=index)
    yield service
    await service.close()
    index.close()


@pytest.fixture
def worksheet(files):
    return files.pdf("worksheet.pdf", [
        ["Photosynthesis needs light, water and carbon dioxide."],
        ["In photosynthesis chlorophyll traps the light energy."],
    ], title="Unit 3", outline=[("Inputs", 0), ("Chlorophyll", 1)])


def test_interleave_takes_turns_and_stops_at_the_limit():
    a, b = [Passage("a1", "", ""), Passage("a2", "", "")], [Passage("b1", "", "")]
    assert [p.title for p in interleave(a, b, 5)] == ["a1", "b1", "a2"]
    assert [p.title for p in interleave(a, b, 2)] == ["a1", "b1"]


async def test_documents_and_notes_come_back_together_each_with_its_citation(service, worksheet):
    outcomes = await service.add("tutor", [worksheet])
    assert [o.status for o in outcomes] == ["added"]
    passages = await service.search("tutor", "photosynthesis chlorophyll light", 4)
    assert len(passages) == 4
    documents, notes = passages[0::2], passages[1::2]
    assert {p.source for p in documents} == {"worksheet.pdf p. 1", "worksheet.pdf p. 2"}
    assert {p.title for p in documents} == {"Unit 3 — Inputs", "Unit 3 — Chlorophyll"}
    assert all(p.source == "study-buddy/notes/photosynthesis.md" for p in notes)
    assert notes[0].title.startswith("Photosynthesis")


async def test_the_tool_shows_numbered_passages_and_credits_the_sources(service, worksheet):
    await service.add("tutor", [worksheet])
    address = Address(channel="webchat", account="default", conversation=Conversation(chat="u1", kind=ConversationKind.DIRECT))
    message = InboundMessage(event_id="e1", address=address, sender=Sender(user="u1"), elements=(Text(text="?"),),
                             received_at=datetime(2025, 1, 1, tzinfo=UTC), addressed=True)
    turn = Turn(partner=PartnerConfig(id="tutor", name="Tutor"), address=address, sender=Sender(user="u1"),
                role=Role.LEARNER, messages=[message])
    context = ToolContext(partner="tutor", turn=turn, surface=frozenset({"knowledge_search"}),
                          services=ToolServices(knowledge=service))
    result = await KnowledgeSearchTool().run(KnowledgeSearchTool.Arguments(query="chlorophyll traps light", limit=2), context)
    assert result.text.startswith("[1] Unit 3 — Chlorophyll (worksheet.pdf p. 2)\nIn photosynthesis chlorophyll traps")
    assert "\n\n[2] " in result.text and "(study-buddy/notes/photosynthesis.md)" in result.text
    assert result.citations[0] == Citation("Unit 3 — Chlorophyll", "worksheet.pdf p. 2")


async def test_a_partner_without_documents_answers_from_its_notes_and_creates_nothing(service):
    passages = await service.search("tutor", "photosynthesis", 2)
    assert [p.source for p in passages] == ["study-buddy/notes/photosynthesis.md"] * 2
    assert not service.root.exists()
    assert await service.documents("tutor") == [] and await service.remove("tutor", "x.pdf") is False


async def test_each_partner_has_its_own_engine(service, worksheet, lightrag_settings):
    await service.configure("graph", lightrag_settings(mode="naive", min_similarity=-1.0))
    await service.add("graph", [worksheet])
    await service.add("tutor", [worksheet])
    assert (await service.base("graph")).engine.name == "lightrag"
    assert (await service.base("tutor")).engine.name == "fts"
    hits = await service.search_documents("graph", "photosynthesis chlorophyll", 2)
    assert {h.citation for h in hits} == {"worksheet.pdf p. 1", "worksheet.pdf p. 2"}
    assert (service.folder("graph") / "lightrag" / "graph").is_dir()
    saved = yaml.safe_load((service.folder("graph") / "knowledge.yaml").read_text())
    assert saved["embedding"]["api_key"].startswith("env:")  # the reference, never the secret


async def test_switching_engines_is_refused_while_documents_are_indexed(service, worksheet, lightrag_settings):
    await service.add("tutor", [worksheet])
    with pytest.raises(KnowledgeError, match=r"partner tutor's 1 document\(s\) are indexed by the fts engine .*fix: remove them first"):
        await service.configure("tutor", lightrag_settings())
    assert (await service.base("tutor")).settings.engine == "fts"
    await service.configure("tutor", {"engine": "fts"})  # the same engine: fine
    assert await service.remove("tutor", "worksheet.pdf")
    settings = await service.configure("tutor", lightrag_settings())
    assert settings.engine == "lightrag" and (await service.base("tutor")).engine.name == "lightrag"


async def test_another_embedding_model_counts_as_another_index(service, worksheet, lightrag_settings):
    await service.configure("graph", lightrag_settings(mode="naive"))
    await service.add("graph", [worksheet])
    other = lightrag_settings()
    other["embedding"] = {**other["embedding"], "model": "openai/another-embedding"}
    with pytest.raises(KnowledgeError, match="lightrag engine with embedding model openai/stub-embedding"):
        await service.configure("graph", other)
    await service.configure("graph", lightrag_settings(mode="mix"))  # the mode is only how it searches


async def test_a_broken_knowledge_base_costs_the_documents_not_the_answer(service, worksheet, caplog, lightrag_settings):
    await service.configure("graph", lightrag_settings(mode="naive", min_similarity=-1.0))
    await service.add("graph", [worksheet])
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    down = lightrag_settings(mode="naive")
    down["embedding"] = {**down["embedding"], "api_base": f"http://127.0.0.1:{port}/v1", "timeout_s": 2}
    await service.configure("graph", down)  # same model and size: allowed; the endpoint is now down
    with caplog.at_level(logging.WARNING, logger="brain.knowledge.service"):
        passages = await service.search("graph", "photosynthesis", 3)
    assert [p.source for p in passages] == ["study-buddy/notes/photosynthesis.md"] * 3
    assert "knowledge search failed partner=graph error=lightrag search failed" in caplog.text

    (service.folder("tutor")).mkdir(parents=True)
    (service.folder("tutor") / "knowledge.yaml").write_text("engine: elastic\n")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="brain.knowledge.service"):
        assert len(await service.search("tutor", "photosynthesis", 2)) == 2
    assert "knowledge.yaml:engine: Input should be 'fts' or 'lightrag'" in caplog.text


async def test_an_edited_knowledge_yaml_reopens_the_engine(service, worksheet, lightrag_settings):
    await service.add("tutor", [worksheet])
    first = await service.base("tutor")
    assert await service.base("tutor") is first
    (service.folder("tutor") / "knowledge.yaml").write_text("engine: fts  # edited by hand\n")
    assert await service.base("tutor") is not first


@pytest.mark.parametrize(("raw", "message"), [
    ({"engine": "lightrag"}, "k.yaml: the lightrag engine needs an embedding model: add `embedding: {model: ..., dimensions: ...}`"),
    ({"engine": "lightrag", "embedding": {"model": "local:", "dimensions": 384}},
     "k.yaml:embedding: local: needs the model's package or folder"),
    ({"engine": "fts", "colour": "red"}, "k.yaml:colour: Extra inputs are not permitted (fix: remove this field or check its spelling)"),
    (["fts"], "k.yaml: the file must hold a mapping of settings"),
])
def test_knowledge_yaml_errors_name_the_file_and_the_field(raw, message):
    from brain.knowledge.settings import parse_settings
    from gateway.core.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        parse_settings(raw, "k.yaml")
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize("engine", ["fts", "lightrag"])
async def test_a_document_reads_back_with_its_passages_in_order_under_either_engine(service, worksheet, lightrag_settings, engine):
    partner = "graph" if engine == "lightrag" else "tutor"
    if engine == "lightrag":
        await service.configure(partner, lightrag_settings(mode="naive"))
    await service.add(partner, [worksheet])
    found = await service.document(partner, "worksheet.pdf")
    assert found is not None
    document, passages = found
    assert document.passages == len(passages) == 2
    assert [(p.seq, p.section, p.pages) for p in passages] == [(0, "Inputs", "p. 1"), (1, "Chlorophyll", "p. 2")]
    assert "chlorophyll traps" in passages[1].text
    assert await service.document(partner, "other.pdf") is None
    assert await service.document("tutor" if engine == "lightrag" else "graph", "worksheet.pdf") is None  # another partner's
    assert await service.remove(partner, "worksheet.pdf")
    assert await service.document(partner, "worksheet.pdf") is None
