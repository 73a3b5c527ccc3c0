"""The offline notes responder: honest notice, cited passages, hostile text, an index that follows the files."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import re
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.notes import (
    MODEL_OFF_NOTICE,
    NO_MODEL_NOTICE,
    SETUP_PROBLEM,
    TROUBLE_NOTICE,
    NotesIndex,
    NotesResponder,
    OfflineReason,
    excerpt,
    fts_query,
    model_status,
    read_note,
)
from gateway.configfile import parse_config
from gateway.core.config import PartnerConfig
from gateway.core.events import Progress, StreamDelta, StreamEnd, TurnEnd
from gateway.core.messages import Address, Conversation, ConversationKind, InboundMessage, Sender, Text
from gateway.core.phrases import CHINESE, Phrase, say
from gateway.core.turns import Role, Turn
from personas.loader import PACKAGED_DIR, load_persona

NOTICE = "No language model is configured"
ADDRESS = Address(channel="webchat", account="default", conversation=Conversation(chat="c1", kind=ConversationKind.DIRECT))
SENDER = Sender(user="learner-1")


def make_turn(*texts: str, persona: str = "study-buddy", arrivals: tuple[str, ...] = (), model=None,
              languages: tuple[str, ...] = (), locale: str = "") -> Turn:
    sender = SENDER.model_copy(update={"locale": locale})

    def message(i: int, text: str) -> InboundMessage:
        return InboundMessage(
            event_id=f"e{i}", address=ADDRESS, sender=sender, elements=(Text(text=text),),
            received_at=datetime.now(UTC),
        )

    partner = PartnerConfig(id="buddy", name="Buddy", persona=persona, model=model, languages=list(languages))
    pending = [message(100 + i, t) for i, t in enumerate(arrivals)]
    return Turn(
        partner=partner, address=ADDRESS, sender=sender, role=Role.LEARNER,
        messages=[message(i, t) for i, t in enumerate(texts)],
        take_arrivals=lambda: [pending.pop(0) for _ in range(len(pending))],
    )


async def collect(responder: NotesResponder, turn: Turn) -> list:
    return [event async for event in responder.respond(turn)]


def final_text(events: list) -> str:
    """Checks the event shape every answer must have, and returns the final Markdown."""
    assert isinstance(events[0], Progress)
    deltas = [e for e in events if isinstance(e, StreamDelta)]
    ends = [e for e in events if isinstance(e, StreamEnd)]
    assert deltas and len(ends) == 1 and events[-1] == TurnEnd()
    assert events.index(ends[0]) == len(events) - 2
    assert "".join(d.text for d in deltas) == ends[0].markdown
    return ends[0].markdown


@pytest.fixture(scope="module")
def responder() -> NotesResponder:
    return NotesResponder()


def copy_persona(root: Path, name: str = "study-buddy") -> Path:
    return Path(shutil.copytree(PACKAGED_DIR / name, root / name))


def touch(path: Path, text: str) -> None:
    """Rewrite a file and move its mtime on, so the change shows however coarse the clock."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text, encoding="utf-8")
    later = max(before, path.stat().st_mtime_ns) + 1_000_000_000
    os.utime(path, ns=(later, later))


# --------------------------------------------------------------------------- answers


async def test_what_is_photosynthesis_cites_the_note_and_says_no_model_is_set(responder):
    text = final_text(await collect(responder, make_turn("what is photosynthesis?")))

    assert NOTICE in text
    assert "**Photosynthesis**" in text
    assert "> Photosynthesis is how plants, algae and some bacteria make their own food." in text
    assert text.index(NOTICE) < text.index("**Photosynthesis**")


async def test_the_learner_reads_one_sentence_about_the_model_and_the_teacher_reads_the_fix_once(tmp_path, caplog):
    responder = NotesResponder()
    caplog.set_level(logging.WARNING, logger="brain.notes")
    first = final_text(await collect(responder, make_turn("what is photosynthesis?")))
    second = final_text(await collect(responder, make_turn("what are fractions?")))

    for text in (first, second):
        notice = text.split("\n\n")[0]
        assert notice == NO_MODEL_NOTICE and notice.count(".") == 1  # one short sentence, and nothing else
        for teacher_only in ("For my teacher", "persona.yaml", "model:", "partners doctor", "restart"):
            assert teacher_only not in text
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "offline answers" in r.getMessage()]
    assert len(warnings) == 1  # once per partner, not once per message
    assert "partner=buddy" in warnings[0].getMessage()
    assert "`model:`" in warnings[0].getMessage() and "persona.yaml" in warnings[0].getMessage()

    other = make_turn("what is photosynthesis?")
    other = dataclasses.replace(other, partner=other.partner.model_copy(update={"id": "chem"}))
    await collect(responder, other)
    assert sum("offline answers" in r.getMessage() for r in caplog.records) == 2  # a second partner is told once too


async def test_a_model_in_trouble_says_so_in_one_sentence_and_still_quotes(responder):
    turn = make_turn("what is photosynthesis?", model={"model": "openai/gpt-4o-mini"})
    text = final_text([e async for e in responder.respond(turn, because=OfflineReason.MODEL_TROUBLE)])

    assert text.startswith(TROUBLE_NOTICE + "\n\n")
    assert "> Photosynthesis is how plants, algae and some bacteria make their own food." in text
    assert "gpt-4o-mini" not in text and "For my teacher" not in text


@pytest.mark.parametrize(
    ("question", "title", "words"),
    [
        ("How do I add fractions?", "Fractions", "common denominator"),
        ("what is newton's second law", "Newton's laws of motion", "F = m × a"),
        ("when was the Bastille stormed", "The French Revolution: the basics", "14 July 1789"),
        ("how do I find the hypotenuse", "The Pythagorean theorem", "c² = 3² + 4²"),
        ("what is condensation", "The water cycle", "Condensation"),
        ("how should I revise for an exam", "How to make a study plan", "study plan"),
        ("what is an adverb", "Parts of speech", "adverb"),
    ],
)
async def test_questions_find_their_note(responder, question, title, words):
    text = final_text(await collect(responder, make_turn(question)))

    assert f"**{title}**" in text and words in text


async def test_nothing_matched_lists_the_topics(responder):
    text = final_text(await collect(responder, make_turn("What is the capital of Peru?")))

    assert NOTICE in text and "couldn't find that in my notes" in text
    for topic in ("Photosynthesis", "Fractions", "The water cycle", "Newton's laws of motion"):
        assert f"- {topic}" in text
    assert "> " not in text


async def test_a_greeting_gets_the_topic_list(responder):
    text = final_text(await collect(responder, make_turn("hi!")))

    assert "Ask me about a topic" in text and "- Photosynthesis" in text


async def test_each_shipped_persona_answers_from_its_own_notes(responder):
    spanish = final_text(await collect(responder, make_turn("ser or estar for feelings?", persona="language-partner")))
    maths = final_text(await collect(responder, make_turn("order of operations", persona="socratic-math")))
    email = final_text(await collect(responder, make_turn("how do I cite a website", persona="homework-helper")))

    assert "**Spanish: ser or estar?**" in spanish and "Estoy cansado" in spanish
    assert "**Order of operations**" in maths
    assert "**Citing sources**" in email
    assert "Photosynthesis" not in spanish + maths + email


async def test_messages_that_arrive_mid_turn_are_part_of_the_question(responder):
    text = final_text(await collect(responder, make_turn("hello", arrivals=("what is photosynthesis",))))

    assert "**Photosynthesis**" in text


async def test_a_partner_model_changes_the_notice_not_the_answer(responder):
    turn = make_turn("what is photosynthesis", model={"model": "openai/gpt-4o-mini"})
    text = final_text(await collect(responder, turn))

    assert NOTICE not in text and text.startswith(MODEL_OFF_NOTICE) and "**Photosynthesis**" in text


async def test_a_persona_without_notes_says_so(tmp_path):
    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "persona.yaml").write_text("name: Bare\n", encoding="utf-8")
    (folder / "SOUL.md").write_text("Be kind.\n", encoding="utf-8")

    text = final_text(await collect(NotesResponder([tmp_path]), make_turn("photosynthesis", persona="bare")))

    assert NOTICE in text and "don't have any study notes yet" in text


async def test_a_persona_that_does_not_load_gets_a_fixed_reply_and_a_log_line(tmp_path, caplog):
    text = final_text(await collect(NotesResponder([tmp_path]), make_turn("hi", persona="missing-persona")))

    assert text == SETUP_PROBLEM and str(tmp_path) not in text  # internal error text never reaches a chat
    assert "missing-persona" in caplog.text


# --------------------------------------------------------------------------- in the turn's language


async def test_a_chinese_partner_without_a_model_says_so_in_chinese_and_still_quotes(responder):
    text = final_text(await collect(responder, make_turn("what is photosynthesis?", languages=("zh-Hans",))))

    assert text.split("\n\n")[0] == say(Phrase.NOTES_NO_MODEL, CHINESE) == "_我还没有配置语言模型，所以现在只能引用我的笔记。_"
    assert NOTICE not in text and "**Photosynthesis**" in text  # the notes are quoted as written


async def test_a_chinese_partner_in_model_trouble_says_so_in_chinese(responder):
    turn = make_turn("what is photosynthesis?", model={"model": "openai/gpt-4o-mini"}, languages=("zh-Hans",))
    text = final_text([e async for e in responder.respond(turn, because=OfflineReason.MODEL_TROUBLE)])

    assert text.startswith(say(Phrase.NOTES_MODEL_TROUBLE, CHINESE) + "\n\n")


@pytest.mark.parametrize(("question", "lead"), [("What is the capital of Peru?", Phrase.NOTES_NOT_FOUND),
                                                ("hi!", Phrase.NOTES_ASK_TOPIC)])
async def test_a_bilingual_partner_lists_its_topics_in_the_learners_language(responder, question, lead):
    turn = make_turn(question, languages=("en", "zh-Hans"), locale="zh-CN")
    text = final_text(await collect(responder, turn))

    assert text.split("\n\n")[:2] == [say(Phrase.NOTES_NO_MODEL, CHINESE), say(lead, CHINESE)]
    assert "- Photosynthesis" in text


async def test_a_chinese_persona_without_notes_or_that_does_not_load_says_so_in_chinese(tmp_path):
    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "persona.yaml").write_text("name: Bare\nlanguages: [zh-Hans]\n", encoding="utf-8")
    (folder / "SOUL.md").write_text("Be kind.\n", encoding="utf-8")
    responder = NotesResponder([tmp_path])

    bare = final_text(await collect(responder, make_turn("photosynthesis", persona="bare")))  # the persona's language
    missing = final_text(await collect(responder, make_turn("hi", persona="missing-persona", languages=("zh-Hans",))))

    assert bare == "\n\n".join([say(Phrase.NOTES_NO_MODEL, CHINESE), say(Phrase.NOTES_NONE_YET, CHINESE)])
    assert missing == say(Phrase.NOTES_SETUP_PROBLEM, CHINESE)


def test_model_status_tells_doctor_what_to_say():
    persona = load_persona("study-buddy")
    message, fix = model_status(persona)
    assert "no language model" in message and "study-buddy" in message
    assert "`model:`" in fix and "persona.yaml" in fix and "restart" in fix

    configured = type(persona).model_validate({**persona.model_dump(), "model": {"model": "ollama/llama3"}})
    assert model_status(configured) == ("persona study-buddy uses ollama/llama3", "")

    partner = PartnerConfig(id="algebra", name="Algebra", model={"model": "openai/gpt-4o-mini"})
    message, fix = model_status(persona, partner)
    assert "openai/gpt-4o-mini" in message and fix == ""
    message, fix = model_status(persona, PartnerConfig(id="algebra", name="Algebra"))
    assert "partner algebra" in message and fix


# --------------------------------------------------------------------------- hostile text

HOSTILE = [
    '"', '""', '"unbalanced', "*", "photo*", "NEAR", "NEAR(photosynthesis water, 2)", "AND", "OR", "NOT",
    "a AND OR NOT b", "((((", "))", "title:photosynthesis", "{title heading}: x", "^photosynthesis",
    "- photosynthesis", "+", "photosynthesis\x00water", "'; DROP TABLE passages; --", "\\", "%", "_", "__init__",
    "😀🧪", "光合作用是什么", "фотосинтез", "x" * 10_000, " ".join(["word"] * 5_000), "\u0301\u0301", "", "   \n\t",
]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
async def test_hostile_text_is_answered_never_raised(responder, text):
    answer = final_text(await collect(responder, make_turn(text)))

    assert NOTICE in answer


FTS_NOISE = st.sampled_from(
    ['"', "'", "*", "(", ")", ":", "^", "-", "+", "NEAR", "NEAR/3", "AND", "OR", "NOT", "{", "}", ",",
     "title", "body", "photosynthesis", "water", "\x00", "\n", "_", "\u0301", "ﬁ", "ß", "İ"]
)
ANY_TEXT = st.one_of(
    st.text(max_size=200),
    st.lists(st.one_of(FTS_NOISE, st.text(max_size=8)), max_size=30).map(" ".join),
    st.lists(FTS_NOISE, max_size=30).map("".join),
)


@settings(max_examples=200, deadline=None)
@given(text=ANY_TEXT)
def test_any_text_makes_a_safe_query_and_an_answer(responder, text):
    query = fts_query(text)
    assert query is None or re.fullmatch(r'"[^\W_]+"( OR "[^\W_]+")*', query)
    persona = load_persona("study-buddy")
    responder.index.search(persona, text)  # the index itself, with nothing to catch a bad query

    answer = final_text(asyncio.run(collect(responder, make_turn(text))))

    assert NOTICE in answer


# --------------------------------------------------------------------------- the index follows the files


def test_the_index_rebuilds_when_a_note_changes(tmp_path):
    folder = copy_persona(tmp_path / "personas")
    index = NotesIndex(tmp_path / "data" / "notes-index.db")
    persona = load_persona("study-buddy", [tmp_path / "personas"])

    assert index.refresh(persona) is True
    assert index.refresh(persona) is False  # built once
    assert index.search(persona, "zebra stripes") == []

    touch(folder / "notes" / "photosynthesis.md",
          (folder / "notes" / "photosynthesis.md").read_text(encoding="utf-8")
          + "\n## Zebras\nZebra stripes have nothing to do with photosynthesis.\n")
    found = index.search(persona, "zebra stripes")
    assert [p.title for p in found] == ["Photosynthesis"] and found[0].heading == "Zebras"

    touch(folder / "notes" / "zebras.md", "# Zebras\n\nZebras are striped horses of Africa.\n")
    assert "Zebras" in index.topics(persona)
    (folder / "notes" / "zebras.md").unlink()
    assert "Zebras" not in index.topics(persona)


def test_the_cache_database_survives_a_restart(tmp_path):
    copy_persona(tmp_path / "personas")
    persona = load_persona("study-buddy", [tmp_path / "personas"])
    path = tmp_path / "data" / "notes-index.db"
    first = NotesIndex(path)
    first.refresh(persona)
    first.close()

    again = NotesIndex(path)

    assert again.refresh(persona) is False
    assert again.search(persona, "photosynthesis")


def test_a_corrupt_cache_database_is_rebuilt(tmp_path):
    path = tmp_path / "notes-index.db"
    path.write_bytes(b"this is not a database" * 100)

    index = NotesIndex(path)

    assert index.search(load_persona("study-buddy"), "fractions")
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] >= 1


def test_from_config_keeps_the_index_in_the_data_dir_and_finds_user_personas(tmp_path):
    copy_persona(tmp_path / "personas", "socratic-math")
    config = parse_config({"data_dir": str(tmp_path / "data")}).model_copy(update={"source": tmp_path / "partners.yaml"})

    responder = NotesResponder.from_config(config)
    answer = responder.answer(PartnerConfig(id="m", name="M", persona="socratic-math"), "order of operations")

    assert (tmp_path / "data" / "notes-index.db").is_file()
    assert "**Order of operations**" in answer
    assert responder.index.topics(load_persona("socratic-math", responder.search))


# --------------------------------------------------------------------------- passages and excerpts


def test_notes_split_into_paragraph_passages(tmp_path):
    note = tmp_path / "sample_note.md"
    note.write_text(
        "---\ntitle: ignored front matter\n---\n"
        "Intro paragraph\nwrapped over two lines.\n\n"
        "## Steps\nThe steps are:\n\n- one\n- two\n\n"
        "## Code\n```\n# not a heading\n```\n\n"
        "## Long\n" + "A long sentence about cells. " * 12 + "\n\n" + "Another long paragraph. " * 12 + "\n",
        encoding="utf-8",
    )

    title, passages = read_note(note, "sample_note.md")

    assert title == "Sample note"  # no level-1 heading: the file name
    assert passages[0].text == "Intro paragraph wrapped over two lines." and passages[0].heading == ""
    assert passages[1].heading == "Steps" and passages[1].text == "The steps are:\n\n- one\n- two"
    assert passages[2].text == "```\n# not a heading\n```" and passages[2].heading == "Code"
    assert [p.heading for p in passages[3:]] == ["Long", "Long"]
    assert all(p.path == "sample_note.md" and p.title == "Sample note" for p in passages)


def test_excerpts_are_short_and_keep_the_lines_that_matter():
    paragraph = "First sentence is here. " * 40
    short = excerpt(paragraph)
    assert len(short) < 450 and short.endswith(" …") and short.startswith("First sentence is here.")

    listing = "\n".join(f"- item {i}: filler words to make this line long enough to matter" for i in range(20))
    picked = excerpt(listing + "\n- the Bastille was stormed", words=["bastille"])
    assert picked == "…\n- the Bastille was stormed"
