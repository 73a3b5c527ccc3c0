"""A Slack learner's language (users.info ``locale``) reaches the gateway's own notices, through slack_sdk.

The learner's Slack says ``zh-CN`` or ``en-US`` (the emulator's users.info, asked with
``include_locale``); the partner speaks English and Chinese; ``/stop`` with nothing running is answered
by the gateway itself, from the phrase catalogue, in the language the locale picks.  When users.info
fails or is slow, the message is still accepted and answered, in the partner's first language.
"""

from __future__ import annotations

from gateway.core.phrases import CHINESE, ENGLISH, Phrase, say
from tests.contract.harness import eventually

EN_FIRST = {"languages": ["en", "zh-Hans"]}
ZH_FIRST = {"languages": ["zh-Hans", "en"]}


def locale_lookups(app: dict) -> list[dict]:
    return [c for c in app["calls"] if c["method"] == "users.info"]


async def stop_answered(rig, user: str, chat: str, count: int = 1) -> str:
    await rig.users.say(chat, "/stop", user=user)
    replies = await rig.replies(chat, count, what="the /stop answer")
    return replies[count - 1]["text"]


async def test_a_learner_whose_slack_speaks_chinese_gets_the_notice_in_chinese_once_asked(open_rig):
    rig = await open_rig(partner=EN_FIRST)
    await rig.users.settings(locales={"U100": "zh-CN"})
    assert await stop_answered(rig, "U100", "D100") == say(Phrase.NOTHING_TO_STOP, CHINESE)
    assert await stop_answered(rig, "U100", "D100", 2) == say(Phrase.NOTHING_TO_STOP, CHINESE)
    [asked] = locale_lookups(await rig.users.app())  # the second message used the remembered answer
    assert asked["params"]["user"] == "U100" and asked["outcome"] == "ok"


async def test_a_learner_whose_slack_speaks_english_gets_english_from_a_chinese_first_partner(open_rig):
    rig = await open_rig(partner=ZH_FIRST)
    await rig.users.settings(locales={"U200": "en-US"})
    assert await stop_answered(rig, "U200", "D200") == say(Phrase.NOTHING_TO_STOP, ENGLISH)


async def test_users_info_refused_still_answers_in_the_partners_language(open_rig):
    rig = await open_rig(partner=ZH_FIRST)
    await rig.users.settings(locales={"U300": "en-US"}, users_info_error="missing_scope")
    assert await stop_answered(rig, "U300", "D300") == say(Phrase.NOTHING_TO_STOP, CHINESE)
    assert await stop_answered(rig, "U300", "D300", 2) == say(Phrase.NOTHING_TO_STOP, CHINESE)
    assert [c["outcome"] for c in locale_lookups(await rig.users.app())] == ["missing_scope"]  # not asked again


async def test_a_slow_users_info_does_not_hold_the_ack_past_slacks_deadline(open_rig):
    """users.info answers after Slack's 3 s; the event is acked (once, not retried) without its locale."""
    rig = await open_rig(mode="events", partner=ZH_FIRST, locale_timeout_s=0.2)
    await rig.users.settings(locales={"U400": "en-US"}, users_info_latency=4.0)
    said = await rig.users.say("D400", "/stop", user="U400")
    [reply] = await rig.replies("D400", 1, what="the /stop answer")
    assert reply["text"] == say(Phrase.NOTHING_TO_STOP, CHINESE)
    event = said["event_ids"][0]

    async def delivered():
        return [d for d in (await rig.users.app())["deliveries"] if d["event_id"] == event] or None

    assert await eventually(delivered, what="the delivery's record") == [{"event_id": event, "retry": 0, "status": 200}]


async def test_reading_the_locale_can_be_turned_off(open_rig):
    rig = await open_rig(partner=ZH_FIRST, read_locale=False)
    await rig.users.settings(locales={"U500": "en-US"})
    assert await stop_answered(rig, "U500", "D500") == say(Phrase.NOTHING_TO_STOP, CHINESE)
    assert locale_lookups(await rig.users.app()) == []


def test_a_locale_wait_that_would_eat_the_ack_deadline_is_refused(monkeypatch):
    import pytest
    from pydantic import ValidationError

    from channels.slack.config import SlackConfig

    monkeypatch.setenv("LOCALE_TEST_BOT", "xoxb-1")
    monkeypatch.setenv("LOCALE_TEST_APP", "xapp-1")
    tokens = {"bot_token": "env:LOCALE_TEST_BOT", "app_token": "env:LOCALE_TEST_APP"}
    assert SlackConfig.model_validate({**tokens, "locale_timeout_s": 1.5}).locale_timeout_s == 1.5
    with pytest.raises(ValidationError, match="half of Slack's 3 s ack deadline"):
        SlackConfig.model_validate({**tokens, "locale_timeout_s": 2})


async def test_the_probe_warns_when_the_token_cannot_read_learners_languages(open_rig):
    from gateway.core.probes import Gravity

    rig = await open_rig(partner=ZH_FIRST, app={"scopes": ["chat:write", "im:history"]})
    result = await rig.channel.probe()
    assert result.ok  # the account works
    [warning] = result.problems
    assert warning.gravity is Gravity.WARNING and "users:read" in warning.message and "users:read" in warning.fix
    await rig.users.settings(locales={"U600": "en-US"})
    assert await stop_answered(rig, "U600", "D600") == say(Phrase.NOTHING_TO_STOP, CHINESE)  # answered all the same


async def test_the_probe_is_quiet_with_the_guides_scopes_or_with_reading_off(open_rig):
    assert (await (await open_rig()).channel.probe()).problems == ()
    off = await open_rig(app={"scopes": ["chat:write"]}, read_locale=False)
    assert (await off.channel.probe()).problems == ()
