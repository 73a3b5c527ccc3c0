"""The gateway's own notices reach a learner in the partner's language, through the real pipeline."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import yaml

from gateway.core.phrases import CHINESE, ENGLISH, Phrase, say, template
from tests.pipeline.conftest import ScriptedResponder

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
