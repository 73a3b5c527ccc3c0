"""The gateway's own notices reach a learner in the partner's language, through the real pipeline."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import yaml

from gateway.app import Gateway
from gateway.core.messages import OutboundReply
from gateway.core.phrases import CHINESE, ENGLISH, Phrase, say, template
from gateway.pipeline.outbox import reply_key
from gateway.store import ReplyState
from tests.pipeline.conftest import ScriptedResponder, make_config
from tests.pipeline.memory_channel import MemoryChannel, make_message

PACKAGED = Path(__file__).resolve().parents[2] / "personas"


@pytest.fixture
def chinese_persona(tmp_path, monkeypatch):
    """A copy of study-buddy that speaks only Simplified Chinese, found where the gateway looks (./personas)."""
    folder = tmp_path / "personas" / "zh-tutor"
    shutil.copytree(PACKAGED / "study-buddy", folder)
    spec = yaml.safe_load((folder / "persona.yaml").read_text())
    spec.update(name="中文伙伴", languages=["zh-Hans"])
    (folder / "persona.yaml").write_text(yaml.safe_dump(spec, allow_unicode=True))
    monkeypatch.chdir(tmp_path)
    return {"persona": "zh-tutor"}


async def test_a_chinese_persona_says_stopped_in_chinese(start_gateway, chinese_persona):
    responder = ScriptedResponder()
    responder.gate = asyncio.Event()  # the turn never finishes on its own
    gateway, channel = await start_gateway(responder, partner=chinese_persona)
    await channel.inject("explain everything")
    while not responder.turns:
        await asyncio.sleep(0.01)
    await channel.inject("/stop")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    assert [s.text for s in channel.sent] == [say(Phrase.STOPPED, CHINESE)]


async def test_a_chinese_persona_apologises_for_a_failed_turn_in_chinese(start_gateway, chinese_persona):
    class Broken(ScriptedResponder):
        async def respond(self, turn):
            raise RuntimeError("the model fell over")
            yield  # pragma: no cover

    gateway, channel = await start_gateway(Broken(), partner=chinese_persona)
    await channel.inject("hi")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    assert [s.text for s in channel.sent] == [say(Phrase.DELIVERY_APOLOGY, CHINESE)]


async def test_a_chinese_persona_sends_its_pairing_notice_in_chinese(start_gateway, chinese_persona):
    gateway, channel = await start_gateway(access={"dm": "pairing"}, partner=chinese_persona)
    await channel.inject("你好", user="newkid")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    [request] = await gateway.store.pairing_list()
    assert channel.sent[0].text == say(Phrase.PAIRING_NOTICE, CHINESE, partner="Tutor", code=request.code)
    assert "批准" in channel.sent[0].text


async def test_a_chinese_persona_refuses_in_chinese(start_gateway, chinese_persona):
    gateway, channel = await start_gateway(access={"dm": "allowlist", "allow_from": ["friend"]}, partner=chinese_persona)
    await channel.inject("hi", user="stranger")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    assert channel.sent[0].text == say(Phrase.REFUSAL, CHINESE)


async def test_a_refusal_the_teacher_wrote_is_sent_as_written(start_gateway, chinese_persona):
    written = {"dm": "allowlist", "allow_from": ["friend"], "refusal": {"text": "Ask Ms. Li."}}
    gateway, channel = await start_gateway(access=written, partner=chinese_persona)
    await channel.inject("hi", user="stranger")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    assert channel.sent[0].text == "Ask Ms. Li."


@pytest.mark.parametrize(("locale", "language"), [("zh-CN", CHINESE), ("de", ENGLISH), ("", ENGLISH)])
async def test_a_bilingual_partner_answers_in_the_learners_locale_when_it_speaks_it(start_gateway, locale, language):
    gateway, channel = await start_gateway(ScriptedResponder(), partner={"languages": ["en", "zh-Hans"]})
    await channel.inject("/stop", locale=locale)
    await channel.wait_for(lambda sent: len(sent) >= 1)
    assert [s.text for s in channel.sent] == [say(Phrase.NOTHING_TO_STOP, language)]
    assert template(Phrase.NOTHING_TO_STOP, ENGLISH) == "There's nothing running to stop."  # English as it was


async def test_a_chinese_persona_apologises_for_an_answer_with_nothing_to_send_in_chinese(start_gateway, chinese_persona):
    """The delivery step's own apology (a reply that renders to nothing) speaks the reply's language."""
    gateway, channel = await start_gateway(ScriptedResponder(lambda turn: "\u200b\u2060"), partner=chinese_persona)
    message = await channel.inject("hi")
    await channel.wait_for(lambda sent: any(s.final for s in sent))
    assert [s.text for s in channel.sent] == [say(Phrase.DELIVERY_APOLOGY, CHINESE)]
    item = await gateway.store.get_reply(reply_key(message.address, message.event_id))
    assert item is not None and item.reply.language == CHINESE  # carried on the outbox row


async def test_a_row_from_before_replies_carried_a_language_apologises_in_the_partners(tmp_path, chinese_persona):
    """An outbox row written by an earlier release has no ``language`` in its payload: it reads as the
    language of the partner bound there (here Chinese), not English."""
    config = make_config(tmp_path, partner=chinese_persona)
    gateway = Gateway(config, responder=ScriptedResponder(), channel_classes={"memory": MemoryChannel})
    await gateway.store.open()
    message = make_message("q", event="e1")
    await gateway.store.accept([message], 60)
    key = reply_key(message.address, message.event_id)
    await gateway.store.put_reply(OutboundReply(idempotency_key=key, target=message.address, markdown="\u200b"),
                                  ReplyState.READY, answered=[message.dedup_key])
    await gateway.store.close()
    with closing(sqlite3.connect(config.database_path)) as conn, conn:
        conn.execute("UPDATE outbox SET payload = json_remove(payload, '$.language') WHERE key = ?", (key,))
        [(payload,)] = conn.execute("SELECT payload FROM outbox WHERE key = ?", (key,)).fetchall()
    assert "language" not in json.loads(payload)

    restarted = Gateway(config, responder=ScriptedResponder(), channel_classes={"memory": MemoryChannel})
    await restarted.start()
    channel = restarted.channel("memory", "acct")
    await channel.wait_for(lambda sent: len(sent) >= 1)
    await restarted.stop()
    assert [s.text for s in channel.sent] == [say(Phrase.DELIVERY_APOLOGY, CHINESE)]


async def test_a_chinese_persona_without_a_model_answers_from_its_notes_with_the_chinese_notice(tmp_path, chinese_persona):
    """The gateway's own brain, no model anywhere: the notes answer, their notice in the partner's language."""
    gateway = Gateway(make_config(tmp_path, partner=chinese_persona), channel_classes={"memory": MemoryChannel})
    await gateway.start()
    try:
        assert gateway.own_brain
        channel = gateway.channel("memory", "acct")
        await channel.inject("what is photosynthesis?")
        await channel.wait_for(lambda sent: any(s.final for s in sent))
    finally:
        await gateway.stop()
    text = "\n".join(s.text for s in channel.sent if s.final)  # the answer's parts, in order
    assert text.startswith(say(Phrase.NOTES_NO_MODEL, CHINESE).strip("_"))
    assert "No language model" not in text and "Photosynthesis" in text
