"""A learner's picture, file or voice note on QQ: fetched from QQ's media host after the ack, once.

The emulator names each attachment as QQ does (``content_type``, ``filename``, ``size``, a
signed ``url``) in the signed webhook event; the gateway stores and acknowledges the event
first, then the pipeline downloads the file into the blob store for the turn.
"""

from __future__ import annotations

from gateway.core.messages import Media, Text

PNG = b"\x89PNG\r\n\x1a\n" + b"a geometry problem"


def base_of(rig) -> str:
    return rig.raw["channels"]["qq"]["school"]["api_base"]


async def test_a_photo_with_words_reaches_the_turn_as_text_and_an_image(qq_rig):
    rig = await qq_rig()
    photo = rig.peer.attach(base_of(rig), PNG, content_type="image/png", filename="题目.png")
    await rig.peer.say("LEARNER0001", "帮我看看这道题", attachments=[photo])
    await rig.texts("LEARNER0001", 1)
    [message] = rig.responder.turns[0].messages
    text, image = message.elements
    assert isinstance(text, Text) and text.text == "帮我看看这道题"
    assert isinstance(image, Media) and image.kind == "image" and image.name == "题目.png"
    assert await rig.gateway.blobs.get(image.blob or "") == PNG
    assert len(rig.peer.downloads) == 1 and rig.inbound_rows() == 1


async def test_a_group_file_alone_is_answered_and_transcribed_voice_is_words(qq_rig):
    rig = await qq_rig()
    sheet = rig.peer.attach(base_of(rig), b"%PDF-1.7 worksheet", content_type="file", filename="worksheet.pdf")
    await rig.peer.say("group:GROUP01", "", user="MEMBER01", attachments=[sheet])
    await rig.texts("group:GROUP01", 1)
    [media] = [e for e in rig.responder.turns[0].messages[0].elements if isinstance(e, Media)]
    assert media.kind == "file" and await rig.gateway.blobs.get(media.blob or "") == b"%PDF-1.7 worksheet"
    voice = rig.peer.attach(base_of(rig), b"#!SILK_V3", content_type="voice", asr_refer_text="勾股定理是什么")
    await rig.peer.say("LEARNER0002", "", attachments=[voice])
    await rig.texts("LEARNER0002", 1)
    assert rig.responder.turns[1].messages[0].text == "勾股定理是什么"
    assert len(rig.peer.downloads) == 1  # the transcript is enough: the voice is not fetched


async def test_an_attachment_the_media_host_refuses_is_a_note_and_the_message_still_answered_once(qq_rig):
    rig = await qq_rig()
    photo = rig.peer.attach(base_of(rig), PNG, content_type="image/jpeg")
    photo["url"] = photo["url"].replace("rkey=", "rkey=expired")
    await rig.peer.say("LEARNER0003", "", attachments=[photo])
    assert len(await rig.texts("LEARNER0003", 1)) == 1
    [media] = rig.responder.turns[0].messages[0].elements
    assert isinstance(media, Media) and media.blob is None and media.missing
    await rig.quiet()
    assert len(rig.peer.texts_to("LEARNER0003")) == 1
