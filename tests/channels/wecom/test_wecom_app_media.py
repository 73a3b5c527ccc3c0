"""A self-built app's files, both ways, over real HTTP against the emulated WeCom.

In: a member's image or voice message is acknowledged first, then fetched by
its ``MediaId`` (``cgi-bin/media/get``) into the blob store before the turn.
Out: an image or file the partner attaches is uploaded (``cgi-bin/media/upload``,
multipart) and sent as its own app message naming the ``media_id``; an upload
WeCom answers 5xx is tried again, and the file still arrives once.
"""

from __future__ import annotations

from gateway.core.messages import Attachment, Media
from tests.contract.harness import counter, eventually

PICTURE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 30
VOICE = b"#!AMR\n" + bytes(range(200))


def media_of(message) -> Media:
    [media] = [e for e in message.elements if isinstance(e, Media)]
    return media


async def test_a_learners_image_is_acknowledged_first_then_fetched_into_the_turn(app_rig):
    rig = await app_rig()
    await rig.peer.say_file("zhangsan", "image", PICTURE, "image/png", "homework.png")
    [delivery] = rig.peer.deliveries
    assert (delivery.status, delivery.body) == (200, "")
    await rig.texts("zhangsan", 1)
    [message] = rig.responder.turns[0].messages
    media = media_of(message)
    assert media.kind == "image" and media.ref is not None and media.ref.locator.startswith("S")
    assert media.blob is not None and not media.missing and media.size == len(PICTURE)
    assert await rig.gateway.blobs.get(media.blob) == PICTURE
    assert media.mime_type == "image/png" and media.name == "homework.png"


async def test_a_voice_message_arrives_as_audio_with_its_format(app_rig):
    rig = await app_rig()
    await rig.peer.say_file("zhangsan", "voice", VOICE, "voice/amr", "note.amr")
    await rig.texts("zhangsan", 1)
    media = media_of(rig.responder.turns[0].messages[0])
    assert media.kind == "audio" and media.ref is not None and media.ref.mime_type == "audio/amr"
    assert await rig.gateway.blobs.get(media.blob or "") == VOICE


async def test_a_media_id_wecom_no_longer_has_is_a_note_and_the_turn_still_runs(app_rig):
    rig = await app_rig()
    await rig.peer.say_plain("zhangsan", rig.peer.file_message("zhangsan", "image", "S-gone-three-days"))
    await rig.texts("zhangsan", 1)
    media = media_of(rig.responder.turns[0].messages[0])
    assert media.blob is None and "invalid media_id" in media.missing


async def test_an_image_reply_is_uploaded_and_arrives_as_bytes_in_an_image_message(app_rig, tmp_path):
    rig = await app_rig()
    drawn = tmp_path / "answer.png"
    drawn.write_bytes(PICTURE)
    notes = tmp_path / "notes.pdf"
    notes.write_bytes(b"%PDF-1.4 the notes")
    rig.responder.attachments = (Attachment(kind="image", path=str(drawn), mime_type="image/png"),
                                 Attachment(kind="file", path=str(notes), name="notes.pdf"))
    await rig.peer.say("zhangsan", "draw it for me")

    async def both():
        return len(rig.peer.files_to("zhangsan")) == 2
    await eventually(both, what="the image and the file")
    await rig.quiet()
    (image_type, image), (file_type, pdf) = rig.peer.files_to("zhangsan")
    assert (image_type, image.kind, image.data, image.name, image.content_type) == (
        "image", "image", PICTURE, "answer.png", "image/png")
    assert (file_type, pdf.kind, pdf.data, pdf.name) == ("file", "file", b"%PDF-1.4 the notes", "notes.pdf")
    assert rig.peer.texts_to("zhangsan") == ["echo: draw it for me"] and len(rig.peer.uploads) == 2


async def test_an_upload_answered_5xx_is_tried_again_and_the_image_is_sent_once(app_rig, tmp_path):
    rig = await app_rig()
    drawn = tmp_path / "answer.png"
    drawn.write_bytes(PICTURE)
    rig.responder.attachments = (Attachment(kind="image", path=str(drawn)),)
    rig.peer.fail_upload(503)
    await rig.peer.say("zhangsan", "and a picture?")
    await eventually(lambda: rig.peer.files_to("zhangsan") or None, what="the image")
    await rig.quiet()
    assert rig.peer.upload_attempts == 2 and len(rig.peer.uploads) == 1
    [(msgtype, image)] = rig.peer.files_to("zhangsan")
    assert msgtype == "image" and image.data == PICTURE
    assert counter(rig.gateway, "partners_dead_letters_total", channel="wecom") == 0


async def test_a_picture_wecom_cannot_show_goes_as_a_file(app_rig, tmp_path):
    rig = await app_rig()
    drawn = tmp_path / "diagram.gif"
    drawn.write_bytes(b"GIF89a" + bytes(64))
    rig.responder.attachments = (Attachment(kind="image", path=str(drawn)),)
    await rig.peer.say("zhangsan", "a gif please")
    await eventually(lambda: rig.peer.files_to("zhangsan") or None, what="the gif")
    [(msgtype, gif)] = rig.peer.files_to("zhangsan")
    assert msgtype == "file" and gif.name == "diagram.gif" and gif.data.startswith(b"GIF89a")
