"""The event webhook: Feishu's URL check, an encrypted and signed event, forged requests refused unstored."""

from __future__ import annotations

import json

import httpx

from tests.channels.feishu.conftest import ENCRYPT_KEY, VERIFY_TOKEN
from tests.peers.feishu_server import event_of, signed


async def test_the_url_check_is_answered_with_its_challenge(rig):
    r = await rig(inbound="webhook", stream=False)
    check = {"type": "url_verification", "challenge": "ch4ll3nge-x1", "token": VERIFY_TOKEN}
    headers, body = signed(check, ENCRYPT_KEY)
    async with httpx.AsyncClient() as client:
        answer = await client.post(r.url, content=body, headers={"Content-Type": "application/json"})
        wrong = await client.post(r.url, content=signed({**check, "token": "wr0ngT0ken"}, ENCRYPT_KEY)[1])
    assert answer.status_code == 200 and answer.json() == {"challenge": "ch4ll3nge-x1"}
    assert wrong.status_code in (401, 403)


async def test_an_encrypted_signed_event_is_stored_then_answered_once(rig):
    r = await rig(inbound="webhook", stream=False)
    event = event_of("hello from the webhook", user="ou_eve", chat="oc_dm_eve", group=False, mention=False)
    r.server._asked[event["event"]["message"]["message_id"]] = "oc_dm_eve"
    headers, body = signed(event, ENCRYPT_KEY, token=VERIFY_TOKEN)
    async with httpx.AsyncClient() as client:
        first = await client.post(r.url, content=body, headers=headers)
        again = await client.post(r.url, content=body, headers=signed(event, ENCRYPT_KEY, token=VERIFY_TOKEN)[0] | {})
    assert first.status_code == 200
    assert again.status_code in (200, 401)  # a redelivery is signed anew; either way it is not answered twice
    [answer] = await r.answers("oc_dm_eve", 1)
    assert "hello from the webhook" in r.server.text_of(answer)
    await r.quiet()
    assert r.inbound_rows() == 1


async def test_a_forged_signature_or_token_is_refused_and_not_stored(rig):
    r = await rig(inbound="webhook", stream=False)
    event = event_of("forged", user="ou_mal", chat="oc_dm_mal", group=False, mention=False)
    headers, body = signed(event, ENCRYPT_KEY, token=VERIFY_TOKEN)
    forged = {**headers, "X-Lark-Signature": "0" * 64}
    other_key = signed(event, "someOtherKey8231", token=VERIFY_TOKEN)
    wrong_token = signed(event, ENCRYPT_KEY, token="n0tTheT0ken77")
    async with httpx.AsyncClient() as client:
        answers = [await client.post(r.url, content=body, headers=forged),
                   await client.post(r.url, content=body, headers={"Content-Type": "application/json"}),
                   await client.post(r.url, content=other_key[1], headers=other_key[0]),
                   await client.post(r.url, content=wrong_token[1], headers=wrong_token[0]),
                   await client.post(r.url, content=json.dumps(event).encode(), headers=headers)]
    assert [a.status_code for a in answers] == [401] * 5
    assert all("Traceback" not in a.text and ENCRYPT_KEY not in a.text for a in answers)
    assert r.inbound_rows() == 0 and r.server.shown("oc_dm_mal") == []


async def test_a_body_that_is_not_an_event_is_a_clear_400(rig):
    r = await rig(inbound="webhook", stream=False)
    not_event = {"schema": "2.0", "header": {"event_id": "e1", "event_type": "im.message.receive_v1", "token": VERIFY_TOKEN},
                 "event": {"message": {}}}
    headers, body = signed(not_event, ENCRYPT_KEY)
    async with httpx.AsyncClient() as client:
        answer = await client.post(r.url, content=body, headers=headers)
    assert answer.status_code == 400 and "Traceback" not in answer.text
