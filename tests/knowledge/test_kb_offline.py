"""Offline answers (no model) from the partner's own knowledge base and its persona's notes, definition first.

Everything is real: files go in through ``KnowledgeService.add`` (extract, chunk,
the fts engine's SQLite FTS5), notes through the notes index, and the answer
is the :class:`NotesResponder`'s as a learner would read it.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from brain.knowledge.rank import Candidate, defines, rank, stems
from brain.knowledge.service import KnowledgeService
from brain.notes import NO_MODEL_NOTICE, TROUBLE_NOTICE, NotesIndex, NotesResponder, OfflineReason
from gateway.configfile import parse_config
from gateway.core.config import PartnerConfig
from gateway.core.events import StreamEnd
from gateway.core.messages import Address, Conversation, ConversationKind, InboundMessage, Sender, Text
from gateway.core.turns import Role, Turn
from personas.loader import PACKAGED_DIR

pytestmark = pytest.mark.timeout(60)

PARTNERS = [
    {"id": "tutor", "name": "Tutor", "persona": "study-buddy"},
    {"id": "rival", "name": "Rival", "persona": "study-buddy"},
]


def turn_for(partner: str, text: str) -> Turn:
    address = Address(channel="webchat", account="default", conversation=Conversation(chat="u1", kind=ConversationKind.DIRECT))
    message = InboundMessage(event_id="e1", address=address, sender=Sender(user="u1"), elements=(Text(text=text),),
                             received_at=datetime(2025, 1, 1, tzinfo=UTC), addressed=True)
    return Turn(partner=PartnerConfig(id=partner, name=partner.title(), persona="study-buddy"), address=address,
                sender=Sender(user="u1"), role=Role.LEARNER, messages=[message])


async def answer(responder: NotesResponder, partner: str, text: str, **options) -> str:
    events = [event async for event in responder.respond(turn_for(partner, text), **options)]
    [end] = [e for e in events if isinstance(e, StreamEnd)]
    return end.markdown


@pytest.fixture
async def offline(tmp_path):
    config = parse_config({"data_dir": str(tmp_path / "data"), "partners": PARTNERS})
    index = NotesIndex()
    service = KnowledgeService.from_config(config, notes=index)
    yield service, NotesResponder(index=index, knowledge=service)
    await service.close()
    index.close()


GEOLOGY = """# Plate tectonics

## Where plates meet
Earthquakes happen where a tectonic plate grinds past another tectonic plate. Tectonic plate edges, tectonic plate
boundaries: a tectonic plate map shows them all.

## The basics
A tectonic plate is a huge slab of the Earth's outer shell, the lithosphere, that floats on the softer mantle beneath it
and moves a few centimetres every year, about as fast as your fingernails grow, carrying continents and ocean floors.
"""


async def test_an_offline_answer_quotes_the_partners_knowledge_base_with_its_citation(offline, files):
    service, responder = offline
    [outcome] = await service.add("tutor", [files.text("geology.md", GEOLOGY)])
    assert outcome.status == "added"

    text = await answer(responder, "tutor", "What is a tectonic plate?")

    assert text.startswith(NO_MODEL_NOTICE + "\n\n")
    assert "**Plate tectonics** — The basics (geology.md)" in text
    assert "> A tectonic plate is a huge slab of the Earth's outer shell" in text
    # the definition comes before the passage that only says "tectonic plate" more often
    assert text.index("A tectonic plate is a huge slab") < text.index("Earthquakes happen")


async def test_a_model_in_trouble_also_answers_from_the_knowledge_base(offline, files):
    service, responder = offline
    await service.add("tutor", [files.text("geology.md", GEOLOGY)])

    text = await answer(responder, "tutor", "what is a tectonic plate", because=OfflineReason.MODEL_TROUBLE)

    assert text.startswith(TROUBLE_NOTICE + "\n\n") and "(geology.md)" in text


async def test_another_partners_knowledge_base_is_never_searched(offline, files):
    service, responder = offline
    await service.add("rival", [files.text("geology.md", GEOLOGY)])

    text = await answer(responder, "tutor", "What is a tectonic plate?")

    assert "geology.md" not in text and "slab" not in text
    assert "couldn't find that in my notes" in text


async def test_documents_and_notes_are_ranked_together_the_definition_first(offline, files):
    service, responder = offline
    mentions = files.text("leaves.md", "# Leaf work\n\nPhotosynthesis photosynthesis: photosynthesis in leaves, "
                                       "photosynthesis worksheets, photosynthesis quiz.\n")
    await service.add("tutor", [mentions])

    text = await answer(responder, "tutor", "what is photosynthesis?")

    assert "(leaves.md)" in text  # the knowledge base's passage is quoted...
    # ...after the note that says what photosynthesis is, though bm25 likes the repetitions better
    assert text.index("> Photosynthesis is how plants") < text.index("(leaves.md)")


# --------------------------------------------------------------------------- the ranking on notes alone

OSMOSIS_MENTIONS = """# Osmosis practical

## Lab day
Osmosis lab: osmosis strips, osmosis timer, osmosis worksheet. Osmosis, osmosis!
"""
OSMOSIS_DEFINED = """# Cells and water

## Across a membrane
Water moves into and out of cells all the time, and the way it does so matters for how plants stay upright and how
our own cells keep their shape. Osmosis is the movement of water through a membrane that lets water through but not
the things dissolved in it, from the side with more water to the side with less water.
"""


def test_the_note_that_defines_the_term_is_quoted_first(tmp_path):
    folder = Path(shutil.copytree(PACKAGED_DIR / "study-buddy", tmp_path / "personas" / "biology"))
    shutil.rmtree(folder / "notes")
    (folder / "notes").mkdir()
    (folder / "notes" / "lab.md").write_text(OSMOSIS_MENTIONS, encoding="utf-8")
    (folder / "notes" / "cells.md").write_text(OSMOSIS_DEFINED, encoding="utf-8")
    responder = NotesResponder([tmp_path / "personas"])
    partner = PartnerConfig(id="bio", name="Bio", persona="biology")

    text = responder.answer(partner, "What is osmosis?")

    quotes = [block for block in text.split("\n\n") if block.startswith("**")]
    assert quotes[0].startswith("**Cells and water** — Across a membrane")
    assert "Osmosis is the movement of water" in quotes[0]


def candidate(text: str, *, title: str = "Notes", heading: str = "", relevance: float = 1.0) -> Candidate:
    return Candidate(title=title, heading=heading, text=text, source="", relevance=relevance)


@pytest.mark.parametrize("sentence", [
    "Photosynthesis is how plants make food.",
    "**Photosynthesis** means making food from light.",
    "- Photosynthesis: plants making food from light.",
    "The process plants use to make sugar from light is called photosynthesis, and it happens in leaves.",
    "Plants make food. Photosynthesis — making food from light — happens in leaves.",
])
def test_definitions_are_recognised(sentence):
    assert defines(sentence, stems(["photosynthesis"]))


@pytest.mark.parametrize("sentence", [
    "In photosynthesis, chlorophyll is the green pigment.",  # defines chlorophyll
    "Photosynthesis needs light, water and carbon dioxide to make sugar: see below.",
    "Plants do photosynthesis.",
])
def test_mentions_are_not_definitions(sentence):
    assert not defines(sentence, stems(["photosynthesis"]))


def test_a_heading_or_title_match_outranks_bm25_and_weak_matches_are_left_out():
    found = rank([
        candidate("Lots of words about fractions and fractions.", relevance=1.0),
        candidate("Add the numerators.", heading="Adding fractions", relevance=0.4),
        candidate("Fractions in cooking.", title="Fractions", relevance=0.3),
        candidate("A stray fraction.", relevance=0.2),
    ], "how do I add fractions?", 5)

    assert [c.text for c in found] == ["Add the numerators.", "Lots of words about fractions and fractions."]

    by_title = rank([
        candidate("Lots of words about fractions and fractions.", relevance=1.0),
        candidate("Fractions in cooking.", title="Fractions", relevance=0.3),
    ], "fractions?", 5)
    assert [c.text for c in by_title] == ["Fractions in cooking.", "Lots of words about fractions and fractions."]


LONG_PARAGRAPH = (
    "# Earth science\n\nPeople have wondered for centuries why mountains rise where they do, why some coasts shake "
    "and others never do, and why the shapes of Africa and South America seem to fit together like pieces of a "
    "puzzle that somebody pulled apart long ago. The answer came only in the twentieth century. A tectonic plate is "
    "a huge slab of the Earth's outer shell that moves a few centimetres a year, and where two plates meet the ground "
    "folds into mountains, splits into rifts or slips in earthquakes, which is why maps of earthquakes trace the "
    "edges of the plates so clearly.\n"
)


async def test_a_long_passage_is_quoted_from_its_definition(offline, files):
    service, responder = offline
    await service.add("tutor", [files.text("earth.md", LONG_PARAGRAPH)])

    text = await answer(responder, "tutor", "what is a tectonic plate?")

    assert "**Earth science** (earth.md)\n> … A tectonic plate is a huge slab of the Earth's outer shell" in text
    assert "People have wondered" not in text
