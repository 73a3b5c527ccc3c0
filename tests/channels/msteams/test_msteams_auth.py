"""The webhook takes only what the Bot Framework signed for this bot, about a connector it may talk to.

Each refused request is answered 401 and leaves nothing in the inbox; the
emulator signs its tokens with keys it publishes under its own OpenID
metadata, so these are the real checks against a real key set.
"""

from __future__ import annotations

import json

import pytest

from tests.peers.msteams_server import _key


async def refused(rig, activity: dict, token: str | None, *, stored: int = 0) -> None:
    answer = await rig.peer.post(activity, token=token)
    assert answer.status_code == 401, answer.text
    assert "Traceback" not in answer.text
    assert rig.inbound_rows() == stored


@pytest.fixture
async def rig(teams_rig):
    return await teams_rig()


def learner(rig, **changes) -> dict:
    return {**rig.peer.activity("a:1amy", "amy", "hello"), **changes}


async def test_a_signed_activity_is_taken_and_answered(rig):
    answer = await rig.peer.post(learner(rig))
    assert answer.status_code == 200
    assert await rig.texts("a:1amy", 1) == ["echo: hello"]


async def test_no_authorization_header_is_refused(rig):
    await refused(rig, learner(rig), "")


async def test_a_token_signed_with_a_key_the_bot_framework_does_not_hold_is_refused(rig):
    kid, _ = rig.peer._signing
    _, stranger = _key()
    await refused(rig, learner(rig), rig.peer.token_for(rig.peer.base, key=(kid, stranger)))


async def test_an_expired_token_is_refused_past_the_five_minute_skew(rig):
    await refused(rig, learner(rig), rig.peer.token_for(rig.peer.base, lifetime_s=-301))


async def test_a_token_for_another_bot_is_refused(rig):
    await refused(rig, learner(rig), rig.peer.token_for(rig.peer.base, audience="00000000-0000-0000-0000-000000000001"))


async def test_a_token_from_another_issuer_is_refused(rig):
    await refused(rig, learner(rig), rig.peer.token_for(rig.peer.base, issuer="https://sts.windows.net/evil/"))


async def test_a_service_url_the_token_does_not_name_is_refused(rig):
    await refused(rig, learner(rig, serviceUrl="http://127.0.0.1:9/"), rig.peer.token_for(rig.peer.base))


async def test_a_signed_service_url_outside_the_allow_list_is_refused_and_never_called(rig):
    evil = "https://attacker.example/"
    await refused(rig, learner(rig, serviceUrl=evil), rig.peer.token_for(evil))


async def test_a_key_not_endorsed_for_the_activitys_channel_is_refused(rig):
    await refused(rig, learner(rig, channelId="skype"), None)


async def test_a_rotated_key_is_fetched_once_and_then_trusted(rig):
    assert (await rig.peer.post(learner(rig))).status_code == 200
    fetched = rig.peer.key_fetches
    rig.peer.rotate()
    second = rig.peer.activity("a:1amy", "amy", "and again")
    assert (await rig.peer.post(second)).status_code == 200
    assert rig.peer.key_fetches == fetched + 1
    third = rig.peer.activity("a:1amy", "amy", "once more")
    assert (await rig.peer.post(third)).status_code == 200
    assert rig.peer.key_fetches == fetched + 1
    assert await rig.texts("a:1amy", 3)


async def test_a_made_up_key_id_does_not_refetch_the_keys_on_every_request(rig):
    assert (await rig.peer.post(learner(rig))).status_code == 200
    fetched = rig.peer.key_fetches
    rig.peer.rotate()  # a kid the gateway has not seen: one fetch
    for n in range(3):
        _, stranger = _key()
        await refused(rig, rig.peer.activity("a:1amy", "amy", f"x{n}"),
                      rig.peer.token_for(rig.peer.base, key=(f"made-up-{n}", stranger)), stored=1)
    assert rig.peer.key_fetches <= fetched + 1


async def test_a_signed_body_that_is_no_activity_is_400_and_an_unsigned_one_401(rig):
    import httpx

    async with httpx.AsyncClient(trust_env=False) as http:
        signed = await http.post(rig.peer.callback_url, content=b'{"not": "an activity"}', headers={
            "Authorization": f"Bearer {rig.peer.token_for(rig.peer.base)}", "Content-Type": "application/json"})
        unsigned = await http.post(rig.peer.callback_url, content=json.dumps([1, 2]))
    assert signed.status_code == 400, signed.text
    assert unsigned.status_code == 401, unsigned.text
    assert rig.inbound_rows() == 0
