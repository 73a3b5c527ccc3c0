"""Events API mode: Slack POSTs signed callbacks to the gateway's webhook route; the signature decides who is Slack.

The emulator plays Slack: it signs each callback with the app's signing
secret (v0 HMAC over ``v0:{timestamp}:{body}``), and retries a callback that
got no 2xx with ``X-Slack-Retry-Num``.  Forged or stale requests are answered
401 and never stored; a retried event is answered once.
"""

from __future__ import annotations

import json
import time

import httpx

from tests.contract.harness import counter, eventually
from tests.peers.slack_server import sign
from tests.waits import HTTP_S


def callback(rig, text: str, *, channel: str = "D1", ts: str = "1700000000.000100") -> dict:
    ids = rig.users.ids
    return {"type": "event_callback", "team_id": ids["team_id"], "api_app_id": ids["app_id"], "event_id": f"Ev{ts}",
            "event": {"type": "message", "channel": channel, "channel_type": "im", "user": "U777", "text": text,
                      "ts": ts, "team": ids["team_id"]}}


async def post(rig, body: dict, *, timestamp: int | None = None, secret: str | None = None, retry: int = 0) -> httpx.Response:
    raw = json.dumps(body).encode()
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    headers = {"Content-Type": "application/json", "X-Slack-Request-Timestamp": stamp,
               "X-Slack-Signature": sign(secret or rig.users.signing_secret, stamp, raw)}
    if retry:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False) as http:
        return await http.post(f"{rig.url}/webhooks/slack/school", content=raw, headers=headers)


async def test_url_verification_is_answered_with_the_challenge(open_rig):
    rig = await open_rig(mode="events")
    verified = await rig.users.verify_url()
    assert verified["status"] == 200
    assert json.loads(verified["answer"]) == {"challenge": verified["challenge"]}


async def test_a_signed_event_from_slack_is_answered_in_its_dm(open_rig):
    rig = await open_rig(mode="events")
    said = await rig.harness.say("hello over http")
    [reply] = await rig.replies(said.chat, 1)
    assert reply["text"] == "echo: hello over http"
    assert all(d["status"] == 200 for d in (await rig.users.app())["deliveries"])


async def test_a_forged_signature_is_refused_401_and_nothing_is_stored(open_rig):
    rig = await open_rig(mode="events")
    answer = await post(rig, callback(rig, "let me in"), secret="not-the-signing-secret")
    assert answer.status_code == 401
    unsigned = await httpx.AsyncClient(timeout=HTTP_S, trust_env=False).post(
        f"{rig.url}/webhooks/slack/school", json=callback(rig, "no signature at all", ts="1700000000.000200"))
    assert unsigned.status_code == 401
    assert rig.inbound_rows() == 0 and rig.responder.turns == []


async def test_a_correctly_signed_but_stale_request_is_refused_as_a_replay(open_rig):
    rig = await open_rig(mode="events")
    six_minutes_ago = int(time.time()) - 6 * 60
    answer = await post(rig, callback(rig, "an old request replayed"), timestamp=six_minutes_ago)
    assert answer.status_code == 401
    assert rig.inbound_rows() == 0
    fresh = await post(rig, callback(rig, "the same words, now", ts="1700000000.000300"))
    assert fresh.status_code == 200
    await rig.replies("D1", 1)


async def test_slacks_retries_of_one_event_are_answered_once(open_rig):
    rig = await open_rig(mode="events")
    body = callback(rig, "did you get this?")
    for retry in (0, 1, 2):  # the first try, then Slack's retries after it saw no answer in time
        assert (await post(rig, body, retry=retry)).status_code == 200
    await rig.replies("D1", 1)
    await eventually(lambda: counter(rig.gateway, "partners_dedup_hits_total", channel="slack") >= 2,
                     what="both retries to be recognised")
    await rig.quiet()
    assert len(rig.responder.turns) == 1
    assert len((await rig.users.seen())["D1"]) == 1


async def test_a_callback_that_found_nobody_listening_is_retried_by_slack_and_answered_once(open_rig):
    rig = await open_rig(mode="events")
    await rig.users.settings(request_url=f"{rig.url}/webhooks/slack/nobody-here")  # 404 at first
    said = await rig.harness.say("knock knock")
    await eventually(lambda: _retried(rig), what="Slack to retry the failed callback")
    await rig.users.settings(request_url=f"{rig.url}/webhooks/slack/school")
    await rig.harness.say_again(said)
    await rig.replies(said.chat, 1)
    await rig.quiet()
    assert len(rig.responder.turns) == 1


async def _retried(rig) -> bool:
    deliveries = (await rig.users.app())["deliveries"]
    return any(d["retry"] >= 1 and d["status"] == 404 for d in deliveries)


async def test_mention_in_a_channel_sent_as_message_and_app_mention_is_answered_once_in_a_thread(open_rig):
    rig = await open_rig(mode="events")
    said = await rig.harness.say("what is a prime?", group=True, mention=True)
    [reply] = await rig.replies(said.chat, 1)
    await eventually(lambda: counter(rig.gateway, "partners_dedup_hits_total", channel="slack") >= 1,
                     what="the app_mention copy of the message to be recognised")
    await rig.quiet()
    assert len(rig.responder.turns) == 1
    asked = rig.responder.turns[0].messages[0]
    assert reply["thread_ts"] == asked.referrer.message  # a top-level mention is answered in a new thread under it


async def test_the_200_comes_only_once_the_event_is_stored(open_rig):
    rig = await open_rig(mode="events")
    answer = await post(rig, callback(rig, "is it safe?", ts="1700000000.000400"))
    assert answer.status_code == 200
    assert rig.stored("D1:1700000000.000400")  # durable before Slack was told it arrived


async def test_an_event_stored_after_slacks_deadline_is_counted_on_metrics(open_rig):
    rig = await open_rig(mode="events")
    channel = rig.gateway.channel("slack", rig.harness.account)
    assert channel.acks.deadline_s == 3  # Slack's, from platforms.toml
    channel.acks.deadline_s = 1e-9  # a deadline no store meets: this accept is late, as a stalled disk's would be
    assert (await post(rig, callback(rig, "late?", ts="1700000000.000500"))).status_code == 200
    async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False) as http:
        metrics = (await http.get(f"{rig.url}/metrics")).text
    assert f'partners_late_acks_total{{account="{rig.harness.account}",channel="slack"}} 1.0' in metrics
    assert rig.stored("D1:1700000000.000500")  # late, but durable: Slack's retry is a duplicate the inbox drops
