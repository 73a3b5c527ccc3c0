"""A Chinese partner on an Official Account speaks Chinese in the gateway's own words.

WeChat tells an Official Account nothing of the learner's language (a callback
carries no locale), so ``language_for`` falls to the partner's first language:
a partner that speaks ``zh-Hans`` first greets a new follower and answers
``/stop`` with nothing running from the catalogue's Chinese.
"""

from __future__ import annotations

import time

from channels._kit.wechat_xml import write_fields
from gateway.core.phrases import CHINESE, ENGLISH, Phrase, say
from tests.contract.harness import ContractResponder

ZH_FIRST = ["zh-Hans", "en"]


def speaking(languages: list[str]):
    def config(raw: dict) -> dict:
        raw["partners"][0]["languages"] = languages
        return raw

    return config


async def follow(rig, openid: str) -> str:
    """The learner follows the account: WeChat posts a ``subscribe`` event (read as ``/start``); what they see."""
    event = write_fields({"ToUserName": "gh_account", "FromUserName": openid, "CreateTime": int(time.time()),
                          "MsgType": "event", "Event": "subscribe"})
    answer = await rig.oa.post(*rig.oa.envelope(event))
    assert answer.status_code == 200, answer.text
    if answer.text.startswith("<xml>"):  # the greeting rode back in the response
        return rig.oa.read_answer(answer.content)["Content"]
    [shown] = await rig.texts(openid, 1)
    return shown


async def test_a_new_follower_of_a_chinese_partner_is_greeted_in_chinese(open_rig):
    rig = await open_rig(config=speaking(ZH_FIRST), responder=ContractResponder())
    assert await follow(rig, "o-follower") == say(Phrase.GREETING, CHINESE, name="Tutor")


async def test_stop_with_nothing_running_is_answered_in_chinese(open_rig):
    rig = await open_rig(config=speaking(ZH_FIRST), responder=ContractResponder())
    await rig.oa.say("o-learner", "/stop")
    assert await rig.texts("o-learner", 1) == [say(Phrase.NOTHING_TO_STOP, CHINESE)]
    await rig.quiet()
    assert rig.responder is not None and rig.responder.turns == []  # the gateway answered, not the model


async def test_an_english_partner_answers_the_same_in_english(open_rig):
    rig = await open_rig(config=speaking(["en", "zh-Hans"]), responder=ContractResponder())
    await rig.oa.say("o-learner", "/stop")
    assert await rig.texts("o-learner", 1) == [say(Phrase.NOTHING_TO_STOP, ENGLISH)]
