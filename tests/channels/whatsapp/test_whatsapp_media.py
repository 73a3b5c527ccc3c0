"""Files both ways on the emulator: a learner's photo fetched in two steps after the ack, a reply's file uploaded first."""

from __future__ import annotations

from gateway.core.messages import Attachment, Media, RenderedPart
from tests.contract.harness import eventually

LEARNER = "15551230011"
PHOTO = b"\xff\xd8\xff\xe0" + b"homework page " * 200


async def test_a_learners_photo_is_fetched_after_the_ack_and_reaches_the_turn(whatsapp_rig):
    rig = await whatsapp_rig()
    rig.peer.media["1234567890123"] = (PHOTO, "image/jpeg")
    wamid = await rig.peer.say(LEARNER, kind="image", text="",
                               media={"id": "1234567890123", "mime_type": "image/jpeg", "caption": "my homework"})
    await rig.texts(LEARNER, 1)
    assert rig.peer.deliveries == [(wamid, 200)]
    [message] = rig.responder.turns[0].messages
    [media] = [e for e in message.elements if isinstance(e, Media)]
    assert media.kind == "image" and media.blob and not media.missing
    assert "my homework" in message.text
    assert rig.gateway.blobs.path(media.blob).read_bytes() == PHOTO


async def test_a_photo_meta_cannot_hand_over_becomes_a_note_not_a_lost_message(whatsapp_rig):
    rig = await whatsapp_rig()
    await rig.peer.say(LEARNER, kind="image", text="", media={"id": "404404404", "mime_type": "image/jpeg"})
    await rig.texts(LEARNER, 1)
    [media] = [e for e in rig.responder.turns[0].messages[0].elements if isinstance(e, Media)]
    assert media.blob is None and media.missing


async def test_a_reply_file_is_uploaded_and_sent_by_its_media_id(whatsapp_rig, tmp_path):
    rig = await whatsapp_rig()
    await rig.peer.say(LEARNER, "send me the sheet")
    await rig.texts(LEARNER, 1)
    sheet = tmp_path / "sheet.pdf"
    sheet.write_bytes(b"%PDF-1.4 fractions")
    address = rig.responder.turns[0].messages[0].address
    referrer = rig.responder.turns[0].messages[0].referrer
    part = RenderedPart(index=1, text="", attachments=(Attachment(kind="file", path=str(sheet), name="sheet.pdf"),))
    await rig.channel.send(address, part, referrer=referrer, idempotency_key="f1:1")
    shown = await eventually(lambda: [s for s in rig.peer.shown if s.kind == "document"], what="the document")
    assert shown[0].data == b"%PDF-1.4 fractions" and shown[0].to == LEARNER
