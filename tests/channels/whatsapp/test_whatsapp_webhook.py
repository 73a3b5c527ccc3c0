"""A WhatsApp number through its webhook and the Graph API, on the emulator: what the learner sees, what Meta is told.

Each test drives the real gateway over loopback HTTP: the emulator signs and
posts webhooks as Meta does, and records the messages it takes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
import time
from contextlib import closing

from tests.channels.whatsapp.conftest import VERIFY
from tests.contract.harness import eventually

LEARNER = "15551230001"


async def test_a_text_is_answered_free_form_and_the_webhook_answered_200(whatsapp_rig):
    rig = await whatsapp_rig()
    wamid = await rig.peer.say(LEARNER, "hello")
    assert await rig.texts(LEARNER, 1) == ["echo: hello"]
    assert rig.peer.deliveries == [(wamid, 200)]
    assert [s.kind for s in rig.peer.shown] == ["text"]


async def test_the_get_verification_echoes_the_challenge_only_for_the_verify_token(whatsapp_rig):
    rig = await whatsapp_rig()
    good = await rig.peer.verify(VERIFY, challenge="CHALLENGE-8812")
    wrong = await rig.peer.verify("not-the-token", challenge="CHALLENGE-8812")
    assert (good.status_code, good.text) == (200, "CHALLENGE-8812")
    assert wrong.status_code == 403 and "CHALLENGE-8812" not in wrong.text


async def test_a_forged_unsigned_or_tampered_body_is_401_and_not_stored(whatsapp_rig):
    rig = await whatsapp_rig()
    _, body = rig.peer.message(LEARNER, "forged")
    other_key = "sha256=" + hmac.new(b"not the app secret", body, hashlib.sha256).hexdigest()
    forged = await rig.peer.post(body, other_key)
    unsigned = await rig.peer.post(body, "")
    tampered = await rig.peer.post(body.replace(b"forged", b"f0rged"), rig.peer.sign(body))
    assert [forged.status_code, unsigned.status_code, tampered.status_code] == [401, 401, 401]
    await rig.quiet()
    assert rig.inbound_rows() == 0 and rig.peer.shown == []


async def test_a_signed_body_that_is_not_a_whatsapp_payload_is_400(whatsapp_rig):
    rig = await whatsapp_rig()
    for body in (b"not json", json.dumps({"object": "page", "entry": []}).encode()):
        answer = await rig.peer.post(body)
        assert answer.status_code == 400, body
    await rig.quiet()
    assert rig.inbound_rows() == 0


async def test_metas_redelivery_of_one_wamid_is_answered_once(whatsapp_rig):
    rig = await whatsapp_rig()
    wamid = await rig.peer.say(LEARNER, "are you there?", attempts=3)
    assert await rig.texts(LEARNER, 1) == ["echo: are you there?"]
    await rig.quiet()
    assert rig.peer.deliveries == [(wamid, 200)] * 3
    assert rig.peer.texts_to(LEARNER) == ["echo: are you there?"] and rig.inbound_rows() == 1


async def test_another_numbers_messages_and_reactions_are_acknowledged_not_answered(whatsapp_rig):
    rig = await whatsapp_rig()
    _, body = rig.peer.message(LEARNER, "for the other number")
    other = body.replace(rig.peer.phone_number_id.encode(), b"999999999999999")
    reaction = rig.peer.message(LEARNER, kind="reaction", media={"message_id": "wamid.X", "emoji": "👍"})[1]
    assert [(await rig.peer.post(b)).status_code for b in (other, reaction)] == [200, 200]
    await rig.peer.say(LEARNER, "and a real one")
    assert await rig.texts(LEARNER, 1) == ["echo: and a real one"]
    await rig.quiet()
    assert rig.inbound_rows() == 1


async def test_statuses_move_the_delivery_state_forward_only(whatsapp_rig):
    rig = await whatsapp_rig()
    rig.peer.post_statuses = True  # delivered, then sent: out of order
    await rig.peer.say(LEARNER, "hi")
    await rig.texts(LEARNER, 1)
    wamid = rig.peer.shown[0].id
    await eventually(lambda: len(rig.peer.statuses_posted) == 2, what="two statuses")
    assert await rig.channel.delivery_state(wamid) == "delivered"  # the late "sent" did not move it back
    await rig.peer.post_status(wamid, LEARNER, "read")
    assert await rig.channel.delivery_state(wamid) == "read"
    await rig.peer.post_status(wamid, LEARNER, "failed", errors=[{"code": 131026, "title": "undeliverable"}])
    assert await rig.channel.delivery_state(wamid) == "failed 131026"
    await rig.peer.post_status(wamid, LEARNER, "read")
    assert await rig.channel.delivery_state(wamid) == "failed 131026"
    assert all(status == 200 for _, status in rig.peer.deliveries)


async def test_the_learners_message_is_marked_read_with_the_typing_indicator(whatsapp_rig):
    rig = await whatsapp_rig()
    wamid = await rig.peer.say(LEARNER, "think hard")
    await rig.texts(LEARNER, 1)
    await rig.channel.typing(rig.responder.turns[0].messages[0].address)
    assert {"messaging_product": "whatsapp", "status": "read", "message_id": wamid,
            "typing_indicator": {"type": "text"}} in rig.peer.reads


async def test_one_malformed_message_in_a_batch_costs_the_others_nothing(whatsapp_rig):
    rig = await whatsapp_rig()
    _, body = rig.peer.message(LEARNER, "the good one")
    batch = json.loads(body)
    value = batch["entry"][0]["changes"][0]["value"]
    value["messages"].insert(0, {"id": "wamid.bad", "type": "text"})  # no "from"
    value["statuses"] = [{"status": "delivered"}]  # no id
    rig.peer.last_wrote[LEARNER] = time.time()  # posted by hand: the emulator's window opens here
    answer = await rig.peer.post(json.dumps(batch).encode())
    assert answer.status_code == 200
    assert await rig.texts(LEARNER, 1) == ["echo: the good one"]
    await rig.quiet()
    assert rig.inbound_rows() == 1


async def test_a_send_meta_fails_by_status_is_recorded_failed_with_its_code(whatsapp_rig):
    rig = await whatsapp_rig()
    _, body = rig.peer.message(LEARNER, "the emulator never saw me write")  # its window stays shut
    assert (await rig.peer.post(body)).status_code == 200
    [failed] = await eventually(lambda: [s for s in rig.peer.statuses_posted if s["status"] == "failed"],
                                what="the failed status")
    assert await eventually(lambda: rig.channel.delivery_state(failed["id"])) == "failed 131047"
    assert rig.peer.shown == []


async def test_a_reply_meta_took_and_then_failed_is_told_to_the_teacher_once(whatsapp_rig):
    """Meta answers a send 200 and says only later, by a ``failed`` status, that it never arrived (131047 outside
    the window, 131026 undeliverable): silent loss unless the teacher hears of it, and once, however often Meta
    posts the status again."""
    rig = await whatsapp_rig()
    await rig.peer.say(LEARNER, "hi")
    await rig.texts(LEARNER, 1)
    wamid = rig.peer.shown[0].id
    for _ in range(2):
        await rig.peer.post_status(wamid, LEARNER, "failed", errors=[{"code": 131026, "title": "Message undeliverable"}])
    await eventually(lambda: told(rig), what="the teacher's report")
    await rig.quiet()
    [said] = told(rig)  # queued for the teacher (whose own 24 hours are closed here: it stays in the outbox)
    assert "131026 Message undeliverable" in said
    assert b'partners_undelivered_total{account="school",channel="whatsapp"} 1.0' in rig.gateway.metrics.render()


def told(rig) -> list[str]:
    with closing(sqlite3.connect(rig.gateway.config.database_path)) as db:
        rows = db.execute("SELECT payload FROM outbox WHERE payload LIKE '%never arrived%'").fetchall()
    return [str(row[0]) for row in rows]
