"""An AI bot's inbound images and files, through the real SDK and the real pipeline, against the emulator.

WeCom hands the AI bot a URL and a key of the message's own (``aeskey``); the file behind the URL is
AES-256-CBC encrypted.  The message is made durable first, then the pipeline fetches the file through
the channel (download, decrypt) into the blob store before the turn -- the emulator serves the encrypted
bytes on loopback and counts the downloads.
"""

from __future__ import annotations

from gateway.core.messages import Media
from tests.contract.harness import eventually

PICTURE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 30
NOTES = b"%PDF-1.4 the homework sheet" + bytes(range(100))


def media_in(rig) -> list[Media]:
    return [e for t in rig.responder.turns for m in t.messages for e in m.elements if isinstance(e, Media)]


async def test_an_image_is_downloaded_decrypted_and_handed_to_the_turn(rig):
    await rig.server.say_file("image", PICTURE)
    await rig.answers("learner1", 1)
    [media] = media_in(rig)
    assert media.kind == "image" and media.blob is not None and not media.missing
    assert await rig.gateway.blobs.get(media.blob) == PICTURE  # the bytes the learner sent, not the ciphertext
    assert media.mime_type == "image/png" and media.size == len(PICTURE)
    assert rig.server.downloads == 1


async def test_a_file_keeps_its_name_and_bytes(rig):
    await rig.server.say_file("file", NOTES, name="作业.pdf")
    await rig.answers("learner1", 1)
    [media] = media_in(rig)
    assert media.kind == "file" and media.name == "作业.pdf"
    assert await rig.gateway.blobs.get(media.blob or "") == NOTES


async def test_a_mixed_group_message_is_its_text_and_its_image_in_one_turn(rig):
    await rig.server.say_file("mixed", PICTURE, user="learner2", group="wrGROUP1", text="what is in this picture?")
    await rig.answers("wrGROUP1", 1)
    [turn] = rig.responder.turns
    [message] = turn.messages
    assert "what is in this picture?" in message.text and "@tutor" not in message.text
    [media] = media_in(rig)
    assert await rig.gateway.blobs.get(media.blob or "") == PICTURE


async def test_a_file_that_does_not_decrypt_is_a_note_and_the_turn_still_runs(rig):
    url, _ = rig.server.serve_file(PICTURE)
    body = {"msgid": "bad1", "aibotid": rig.server.bot_id, "chattype": "single", "from": {"userid": "learner1"},
            "msgtype": "image", "image": {"url": url, "aeskey": "A" * 43}}  # a key, but not this file's
    await rig.server._push(body, "learner1")
    await rig.answers("learner1", 1)
    [media] = media_in(rig)
    assert media.blob is None and "decrypt" in media.missing


async def test_a_redelivered_image_is_answered_once(rig):
    said = await rig.server.say_file("image", PICTURE)
    await rig.answers("learner1", 1)
    await rig.server.redeliver(said)
    await rig.server.say("and a text after it")
    await eventually(lambda: len(rig.server.answers("learner1")) >= 2, what="the text's answer")
    await rig.quiet()
    assert len(rig.server.answers("learner1")) == 2 and len(media_in(rig)) == 1
