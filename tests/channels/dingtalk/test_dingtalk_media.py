"""Pictures, files and voice a learner sends the robot: fetched by downloadCode after the ack, once.

Through the emulator: the robot message carries ``content.downloadCode``; the gateway makes it
durable and acks the frame, then the pipeline exchanges the code at ``messageFiles/download``
(with the app's token and robot code) for a signed URL and streams the bytes into the blob store.
"""

from __future__ import annotations

from gateway.core.messages import Media, Text

PNG = b"\x89PNG\r\n\x1a\n" + b"homework page 3"


def media_of(rig, index: int = 0) -> list[Media]:
    return [e for e in rig.responder.turns[index].messages[0].elements if isinstance(e, Media)]


async def test_a_picture_is_fetched_after_the_ack_and_answered_once(dingtalk_rig):
    rig = await dingtalk_rig()
    said = await rig.server.say_file("picture", PNG, user="stu1")
    [answer] = await rig.answers(said.chat, 1)
    [media] = media_of(rig)
    assert media.kind == "image" and media.blob is not None
    assert await rig.gateway.blobs.get(media.blob) == PNG
    assert rig.server.downloads == [code for code in rig.server.files]  # one exchange, for this file
    assert not rig.server.unacked() and answer.via == "webhook"


async def test_a_rich_text_message_keeps_its_words_and_picture_in_order(dingtalk_rig):
    rig = await dingtalk_rig()
    said = await rig.server.say_file("richText", PNG, text="这道题怎么做？", group="cid-study", user="stu2")
    await rig.answers(said.chat, 1)
    elements = rig.responder.turns[0].messages[0].elements
    assert isinstance(elements[0], Text) and elements[0].text == "这道题怎么做？"
    assert isinstance(elements[1], Media) and elements[1].kind == "image"
    assert await rig.gateway.blobs.get(elements[1].blob or "") == PNG


async def test_a_file_keeps_its_name_and_transcribed_voice_is_read_as_words(dingtalk_rig):
    rig = await dingtalk_rig()
    essay = b"%PDF-1.4 my essay"
    first = await rig.server.say_file("file", essay, name="作文.pdf", user="stu3")
    await rig.answers(first.chat, 1)
    [media] = media_of(rig)
    assert media.kind == "file" and media.name == "作文.pdf"
    assert await rig.gateway.blobs.get(media.blob or "") == essay
    spoken = await rig.server.say_file("audio", b"#!AMR voice", recognition="什么是光合作用", user="stu4")
    await rig.answers(spoken.chat, 1)
    second = rig.responder.turns[1].messages[0]
    assert second.text == "什么是光合作用" and not media_of(rig, 1)
    assert len(rig.server.downloads) == 1  # the transcript is enough: the voice itself is not fetched


async def test_a_file_dingtalk_will_not_hand_out_is_a_note_and_the_message_is_still_answered_once(dingtalk_rig):
    rig = await dingtalk_rig()
    rig.server.refuse_downloads = True  # the code no longer exchanges (expired, or withdrawn)
    said = await rig.server.say_file("video", b"\x00\x00\x00\x18ftypmp42", user="stu5")
    [answer] = await rig.answers(said.chat, 1)
    [media] = media_of(rig)
    assert media.blob is None and media.missing
    assert len(rig.server.answers(said.chat)) == 1 and answer.text


async def test_a_type_the_gateway_does_not_read_is_refused_and_acked_not_answered(dingtalk_rig):
    rig = await dingtalk_rig()
    said = await rig.server.post_message({"msgtype": "interactiveCard", "content": {"cardId": "x"}}, user="stu6")
    follow = await rig.server.say("still there?", user="stu6")
    await rig.answers(follow.chat, 1)
    assert len(rig.server.in_chat(said.chat)) == 1 and len(rig.responder.turns) == 1
    assert not rig.server.unacked()
    assert b'reason="dingtalk-msgtype"} 1.0' in rig.gateway.metrics.render()
