"""Files in (getFile + download into the account's data dir, within a limit) and out (sendPhoto/Voice/Document)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from gateway.core.messages import Attachment, Media
from tests.channels.telegram.conftest import new_id
from tests.contract.harness import eventually

PICTURE = bytes(range(256)) * 40


def local_path(media: Media) -> Path:
    assert media.url and media.url.startswith("file://"), media
    return Path(unquote(urlparse(media.url).path))


async def test_a_photo_is_downloaded_into_the_data_dir_and_handed_on_with_its_caption(open_rig):
    rig = await open_rig()
    chat = new_id()
    await rig.users.say(chat, "is my drawing right?", media={"kind": "photo", "hex": PICTURE.hex()})
    await rig.replies(chat, 1)
    [message] = rig.responder.turns[0].messages
    [media] = [e for e in message.elements if isinstance(e, Media)]
    path = local_path(media)
    assert media.kind == "image" and media.platform_ref
    assert path.read_bytes() == PICTURE
    assert path.is_relative_to(rig.data_dir)
    assert "is my drawing right?" in message.text


async def test_a_voice_note_and_a_document_arrive_as_audio_and_file(open_rig):
    rig = await open_rig()
    chat = new_id()
    await rig.users.say(chat, "", media={"kind": "voice", "hex": b"OggS-voice".hex()})
    await rig.users.say(chat, "", media={"kind": "document", "name": "essay.txt", "hex": b"My essay.".hex()})
    await eventually(lambda: sum(len(t.messages) for t in rig.responder.turns) == 2, what="both messages in turns")
    kinds = {e.kind: local_path(e).read_bytes() for t in rig.responder.turns for m in t.messages for e in m.elements
             if isinstance(e, Media)}
    assert kinds == {"audio": b"OggS-voice", "file": b"My essay."}



async def test_a_document_whose_name_cannot_be_a_file_name_is_still_saved_and_the_queue_moves_on(open_rig):
    """The saved file took its extension from the learner's file name; an "extension" of 300 characters
    made saving fail with OSError, which no one caught: the poll loop died on that update, restarted onto
    the same offset, and the account answered nothing ever again."""
    rig = await open_rig()
    chat = new_id()
    await rig.users.say(chat, "my notes", media={"kind": "document", "name": "notes." + "x" * 300, "hex": b"notes".hex()})
    await rig.users.say(chat, "and a question")
    await eventually(lambda: sum(len(t.messages) for t in rig.responder.turns) == 2, what="both messages in turns")
    first, second = (m for t in rig.responder.turns for m in t.messages)
    [media] = [e for e in first.elements if isinstance(e, Media)]
    assert local_path(media).read_bytes() == b"notes" and len(local_path(media).name.encode()) <= 255
    assert second.text == "and a question"
    [account] = (await rig.gateway.status()).accounts
    assert account.restarts == 0

async def test_a_file_over_the_limit_is_not_downloaded_and_the_message_says_why(open_rig):
    rig = await open_rig()
    chat = new_id()
    await rig.users.say(chat, "here is the video", media={"kind": "document", "name": "lesson.mp4", "size": 25 * 1024 * 1024})
    await rig.replies(chat, 1)
    [message] = rig.responder.turns[0].messages
    [media] = [e for e in message.elements if isinstance(e, Media)]
    assert media.url is None
    assert "here is the video" in message.text
    assert "file lesson.mp4 not downloaded: 25.0 MB is over the 20.0 MB limit" in message.text
    assert not (rig.data_dir / "channels" / "telegram" / "main" / "media").exists()


async def test_a_lower_limit_set_by_the_teacher_applies_to_what_telegram_would_serve(open_rig):
    rig = await open_rig(max_download_bytes=1000)
    chat = new_id()
    await rig.users.say(chat, "", media={"kind": "photo", "hex": PICTURE.hex()})
    await rig.replies(chat, 1)
    [message] = rig.responder.turns[0].messages
    assert "over the 0.0 MB limit" in message.text and "not downloaded" in message.text


async def test_attachments_go_out_as_photo_voice_and_document_after_the_text(open_rig, tmp_path):
    drawing, voice, sheet = tmp_path / "triangle.png", tmp_path / "hint.ogg", tmp_path / "sheet.pdf"
    drawing.write_bytes(b"\x89PNG...")
    voice.write_bytes(b"OggS...")
    sheet.write_bytes(b"%PDF...")
    rig = await open_rig()
    rig.responder.attachments = (
        Attachment(kind="image", path=str(drawing), name="triangle.png"),
        Attachment(kind="audio", path=str(voice), name="hint.ogg"),
        Attachment(kind="file", path=str(sheet), name="sheet.pdf"),
    )
    chat = new_id()
    asked = await rig.users.say(chat, "show me")
    shown = await rig.replies(chat, 4)
    await rig.quiet()
    assert [(m["kind"], m["attachment"]) for m in shown] == [
        ("text", None), ("photo", "triangle.png"), ("voice", "hint.ogg"), ("document", "sheet.pdf")]
    assert shown[0]["reply_to"] == asked["message_id"]
    assert len((await rig.users.seen())[str(chat)]) == 4


async def test_a_failed_file_send_retries_without_repeating_the_text(open_rig, tmp_path):
    drawing = tmp_path / "graph.png"
    drawing.write_bytes(b"\x89PNG...")
    rig = await open_rig()
    rig.responder.attachments = (Attachment(kind="image", path=str(drawing), name="graph.png"),)
    await rig.users.faults(next=["", "503"])  # the text goes through, the photo fails once
    chat = new_id()
    await rig.users.say(chat, "plot it")
    await rig.replies(chat, 2)
    await rig.quiet()
    shown = (await rig.users.seen())[str(chat)]
    assert [m["kind"] for m in shown] == ["text", "photo"]
    outcomes = [a["outcome"] for a in (await rig.users.attempts())["attempts"]]
    assert outcomes == ["posted", "unavailable", "posted"]


async def test_a_file_that_can_never_be_sent_is_given_up_after_the_text_without_repeating_it(open_rig, tmp_path):
    """The file is an attachment part of its own: its failure is recorded against it alone, the text part
    already out stays recorded (no channel memory of what is on screen), and nothing is posted twice."""
    rig = await open_rig()
    rig.responder.attachments = (Attachment(kind="file", path=str(tmp_path / "deleted.pdf"), name="deleted.pdf"),)
    chat = new_id()
    await rig.users.say(chat, "the worksheet please")
    await rig.replies(chat, 1)  # the text goes out; the file cannot
    await rig.quiet()
    assert [m["kind"] for m in (await rig.users.seen())[str(chat)]] == ["text"]
    assert [a["outcome"] for a in (await rig.users.attempts())["attempts"]] == ["posted"]


async def test_a_file_telegram_gives_no_path_for_is_a_note_not_a_crash(tmp_path):
    """``file_path`` is optional in getFile's answer; without it PTB's download raises RuntimeError, which
    escaped the note handling and stopped the poll loop on that update, again after every restart."""
    from telegram import File

    from channels.telegram.media import download_media
    from gateway.core.messages import (
        AccountId,
        Address,
        ChannelName,
        ChatId,
        Conversation,
        ConversationKind,
        InboundMessage,
        Sender,
        UserId,
    )

    class Bot:
        async def get_file(self, file_id):
            return File(file_id=file_id, file_unique_id="u1", file_size=10)

    message = InboundMessage(
        event_id="1", received_at="2026-11-30T10:00:00Z", sender=Sender(user=UserId("7")),
        address=Address(channel=ChannelName("telegram"), account=AccountId("main"),
                        conversation=Conversation(chat=ChatId("7"), kind=ConversationKind.DIRECT)),
        elements=(Media(kind="file", platform_ref="doc-1", name="essay.txt"),))
    received = await download_media(Bot(), message, tmp_path, 1000)
    [media] = [e for e in received.elements if isinstance(e, Media)]
    assert media.url is None and "essay.txt not downloaded" in received.text


async def test_a_file_to_send_is_read_off_the_event_loop(open_rig, tmp_path, monkeypatch):
    """Uploads go up to 50 MB; reading one with read_bytes on the event loop stalled every channel meanwhile."""
    import threading

    drawing = tmp_path / "graph.png"
    drawing.write_bytes(b"\x89PNG...")
    readers: list[threading.Thread] = []
    original = Path.read_bytes

    def noting(path):
        if path == drawing:
            readers.append(threading.current_thread())
        return original(path)

    monkeypatch.setattr(Path, "read_bytes", noting)
    rig = await open_rig()
    rig.responder.attachments = (Attachment(kind="image", path=str(drawing), name="graph.png"),)
    chat = new_id()
    await rig.users.say(chat, "plot it")
    await rig.replies(chat, 2)
    assert readers and threading.main_thread() not in readers


async def test_a_batch_whose_downloads_outlast_the_stall_watch_is_still_taken(open_rig, monkeypatch):
    """The poll loop showed life only when getUpdates returned: a batch of files taking longer to download
    than the supervisor's stall watch (90 s; a class uploading homework on a slow link) was cancelled as a
    stall, fetched again from the same offset, downloaded again, cancelled again -- forever."""
    import asyncio

    import channels.telegram.channel as channel_module
    from gateway.supervisor import Supervisor

    start, download = Supervisor.start, channel_module.download_media

    def quick_watch(self, name, factory, *, stall_after=None):
        return start(self, name, factory, stall_after=2.0 if stall_after else None)

    async def slow_download(*args, **kwargs):
        await asyncio.sleep(0.8)
        return await download(*args, **kwargs)

    monkeypatch.setattr(Supervisor, "start", quick_watch)
    monkeypatch.setattr(channel_module, "download_media", slow_download)
    rig = await open_rig()
    chat = new_id()
    for page in range(4):
        await rig.users.say(chat, "", media={"kind": "document", "name": f"page{page}.pdf", "hex": b"%PDF".hex()})
    await eventually(lambda: sum(len(t.messages) for t in rig.responder.turns) == 4,
                     what="all four pages taken")
    [account] = (await rig.gateway.status()).accounts
    assert account.restarts == 0
