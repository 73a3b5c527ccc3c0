"""Files from the partner to a learner on personal WeChat: getuploadurl, the encrypted CDN upload, sendmessage.

The emulator opens every upload with the key the later ``sendmessage`` names and
records the plaintext, so these tests see what the learner's phone would show --
the exact bytes and name -- through the real gateway over loopback HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib

from gateway.core.messages import Attachment
from tests.channels.weixin.ilink_rig import TEACHER, start_gateway
from tests.contract.harness import ContractResponder, eventually

LEARNER = "learner@im.wechat"
DIAGRAM = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 7 + b"end"
WORKSHEET = b"%PDF-1.7\n" + "分数练习".encode() * 300


def answering(*attachments: Attachment, text: str = "Here you go.") -> ContractResponder:
    responder = ContractResponder()
    responder.answer = lambda turn: text if "please" in turn.messages[-1].text else "noted"
    responder.attachments = attachments
    return responder


async def files(rig, count: int):
    async def enough():
        sent = rig.peer.files_to(LEARNER)
        return sent if len(sent) >= count else None

    return await eventually(enough, what=f"{count} files to {LEARNER}")


async def test_an_image_reply_arrives_with_its_exact_bytes(ilink_rig, tmp_path):
    (tmp_path / "cell.png").write_bytes(DIAGRAM)
    rig = await ilink_rig(responder=answering(Attachment(kind="image", path=str(tmp_path / "cell.png"))))
    await rig.peer.say(LEARNER, "the diagram please")
    [image] = await files(rig, 1)
    assert await rig.texts(LEARNER, 1) == ["Here you go."]
    await rig.quiet()
    assert (image.kind, image.data) == ("image", DIAGRAM)
    assert image.context_token == rig.peer.log[0]["context_token"]
    assert rig.peer.refused == [] and rig.peer.uploads == [200]
    [announced] = rig.peer.stored.values()
    assert announced.media_type == 1 and announced.to == LEARNER


async def test_a_file_reply_keeps_its_bytes_and_name(ilink_rig, tmp_path):
    (tmp_path / "sheet.pdf").write_bytes(WORKSHEET)
    rig = await ilink_rig(responder=answering(Attachment(kind="file", path=str(tmp_path / "sheet.pdf"),
                                                         name="分数练习.pdf")))
    await rig.peer.say(LEARNER, "the worksheet please")
    [sheet] = await files(rig, 1)
    await rig.quiet()
    assert (sheet.kind, sheet.name, sheet.data) == ("file", "分数练习.pdf", WORKSHEET)


async def test_a_voice_note_goes_as_a_file_with_its_bytes(ilink_rig, tmp_path):
    (tmp_path / "say-it.mp3").write_bytes(b"ID3" + b"\x00" * 700)
    rig = await ilink_rig(responder=answering(Attachment(kind="audio", path=str(tmp_path / "say-it.mp3"))))
    await rig.peer.say(LEARNER, "how do I say it, please")
    [voice] = await files(rig, 1)
    await rig.quiet()
    assert (voice.kind, voice.name, voice.data) == ("file", "say-it.mp3", b"ID3" + b"\x00" * 700)


async def test_an_image_by_url_is_fetched_then_uploaded(ilink_rig):
    rig = await ilink_rig(responder=answering())
    rig.peer.files["map.png"] = DIAGRAM
    rig.responder.attachments = (Attachment(kind="image", url=rig.peer.base_url + "_test/files/map.png"),)
    await rig.peer.say(LEARNER, "the map please")
    [image] = await files(rig, 1)
    await rig.quiet()
    assert (image.kind, image.data) == ("image", DIAGRAM)


async def test_an_image_by_url_that_is_not_there_goes_as_its_link(ilink_rig):
    rig = await ilink_rig(responder=answering(text=""))
    gone = rig.peer.base_url + "_test/files/gone.png"
    rig.responder.attachments = (Attachment(kind="image", url=gone, name="gone.png"),)
    await rig.peer.say(LEARNER, "the map please")
    assert await rig.texts(LEARNER, 1) == [f"gone.png: {gone}"]
    await rig.quiet()
    assert rig.peer.uploads == [] and rig.peer.files_to(LEARNER) == []


async def test_a_cdn_5xx_on_upload_is_retried_and_the_file_is_sent_once(ilink_rig, tmp_path):
    (tmp_path / "cell.png").write_bytes(DIAGRAM)
    rig = await ilink_rig(responder=answering(Attachment(kind="image", path=str(tmp_path / "cell.png")), text=""))
    rig.peer.fail_next_upload(503)
    await rig.peer.say(LEARNER, "the diagram please")
    [image] = await files(rig, 1)
    await rig.quiet()
    assert rig.peer.uploads == [503, 200]
    assert image.data == DIAGRAM
    assert len(rig.peer.sent) == 1 and rig.peer.refused == []


async def test_a_cdn_4xx_is_permanent_and_nothing_is_sent_for_it(ilink_rig, tmp_path):
    (tmp_path / "cell.png").write_bytes(DIAGRAM)
    rig = await ilink_rig(responder=answering(Attachment(kind="image", path=str(tmp_path / "cell.png"))))
    rig.peer.fail_next_upload(413)
    await rig.peer.say(LEARNER, "the diagram please")
    await rig.texts(LEARNER, 1)
    await rig.quiet()
    assert rig.peer.uploads == [413]
    assert rig.peer.files_to(LEARNER) == []


async def test_an_upload_that_succeeded_before_the_gateway_died_is_not_lost_and_sent_once(ilink_rig, tmp_path):
    (tmp_path / "cell.png").write_bytes(DIAGRAM)
    rig = await ilink_rig(responder=answering(Attachment(kind="image", path=str(tmp_path / "cell.png")), text=""))
    rig.peer.hold_uploads = asyncio.Event()
    await rig.peer.say(LEARNER, "the diagram please")
    await eventually(lambda: rig.peer.held == 1, what="the upload to be stored and held")
    await rig.gateway.stop()  # the CDN has the file; the gateway never heard, and never sent the message
    held, rig.peer.hold_uploads = rig.peer.hold_uploads, None
    held.set()
    assert rig.peer.sent == []
    async with contextlib.AsyncExitStack() as stack:
        await start_gateway(rig, stack)
        [image] = await files(rig, 1)
        await rig.quiet()
    assert image.data == DIAGRAM
    assert len(rig.peer.sent) == 1 and rig.peer.uploads == [200, 200]


async def test_files_count_against_the_reply_budget_of_ten(ilink_rig, tmp_path):
    pictures = []
    for n in range(11):
        (tmp_path / f"p{n}.png").write_bytes(DIAGRAM + bytes([n]))
        pictures.append(Attachment(kind="image", path=str(tmp_path / f"p{n}.png")))
    rig = await ilink_rig(responder=answering())
    await rig.peer.say(TEACHER, "I am here")
    await rig.texts(TEACHER, 1)
    await rig.quiet()
    rig.responder.attachments = tuple(pictures)
    await rig.peer.say(LEARNER, "all the pictures please")
    await eventually(lambda: len(rig.peer.texts_to(TEACHER)) >= 2, what="the teacher to be told")
    await rig.quiet()
    to_learner = [s for s in rig.peer.sent if s.to == LEARNER]
    assert len(to_learner) == 10 and rig.peer.refused == []
    sent = rig.peer.files_to(LEARNER)
    assert [s.data for s in sent] == [DIAGRAM + bytes([n]) for n in range(len(sent))]  # in order, each whole
