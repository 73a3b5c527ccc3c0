"""Files in (after the ack: getFile + a streamed download into the blob store, within a limit) and out."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from gateway.core.messages import Attachment, Media
from tests.channels.telegram.conftest import new_id
from tests.contract.harness import eventually

PICTURE = bytes(range(256)) * 40


def media_of(message) -> Media:
    [media] = [e for e in message.elements if isinstance(e, Media)]
    return media


async def test_a_photo_is_fetched_into_the_blob_store_and_handed_on_with_its_caption(open_rig):
    rig = await open_rig()
    chat = new_id()
    await rig.users.say(chat, "is my drawing right?", media={"kind": "photo", "hex": PICTURE.hex()})
    await rig.replies(chat, 1)
    [message] = rig.responder.turns[0].messages
    media = media_of(message)
    assert media.kind == "image" and media.ref is not None and media.ref.locator.startswith("photo-")
    assert media.blob is not None and not media.missing and media.size == len(PICTURE)
    assert await rig.gateway.blobs.get(media.blob) == PICTURE
    assert Path(unquote(urlparse(rig.gateway.blobs.url(media.blob)).path)).is_relative_to(rig.data_dir / "blobs")
    assert "is my drawing right?" in message.text


async def test_a_voice_note_and_a_document_arrive_as_audio_and_file(open_rig):
    rig = await open_rig()
    chat = new_id()
    await rig.users.say(chat, "", media={"kind": "voice", "hex": b"OggS-voice".hex()})
    await rig.users.say(chat, "", media={"kind": "document", "name": "essay.txt", "hex": b"My essay.".hex()})
    await eventually(lambda: sum(len(t.messages) for t in rig.responder.turns) == 2, what="both messages in turns")
    kinds = {media_of(m).kind: await rig.gateway.blobs.get(media_of(m).blob or "")
             for t in rig.responder.turns for m in t.messages}
    assert kinds == {"audio": b"OggS-voice", "file": b"My essay."}


async def test_a_document_whose_name_cannot_be_a_file_name_is_still_kept_and_the_queue_moves_on(open_rig):
    """The learner names the file: a name of 300 characters, or with a path in it, is cleaned for the
    record and never becomes a path on disk (the blob's key is the hash of its bytes)."""
    rig = await open_rig()
    chat = new_id()
    await rig.users.say(chat, "my notes", media={"kind": "document", "name": "../../notes." + "x" * 300, "hex": b"notes".hex()})
    await rig.users.say(chat, "and a question")
    await eventually(lambda: sum(len(t.messages) for t in rig.responder.turns) == 2, what="both messages in turns")
    first, second = (m for t in rig.responder.turns for m in t.messages)
    media = media_of(first)
    assert await rig.gateway.blobs.get(media.blob or "") == b"notes"
    assert "/" not in media.name and len(media.name.encode()) <= 255 and not media.name.startswith(".")
    assert second.text == "and a question"
    [account] = (await rig.gateway.status()).accounts
    assert account.restarts == 0


async def test_a_file_over_the_limit_is_not_fetched_and_the_model_reads_why(open_rig):
    rig = await open_rig()
    chat = new_id()
    await rig.users.say(chat, "here is the video", media={"kind": "document", "name": "lesson.mp4", "size": 25 * 1024 * 1024})
    await rig.replies(chat, 1)
    [message] = rig.responder.turns[0].messages
    media = media_of(message)
    assert media.blob is None and media.missing == "too large (25.0 MB > 20.0 MB)"
    assert "here is the video" in message.text
    assert "the learner sent a file (lesson.mp4) that could not be fetched: too large (25.0 MB > 20.0 MB)" in message.text
    assert (await rig.users.info())["downloads"] == []


async def test_a_lower_limit_set_by_the_teacher_applies_to_what_telegram_would_serve(open_rig):
    rig = await open_rig(max_download_bytes=1000)
    chat = new_id()
    await rig.users.say(chat, "", media={"kind": "photo", "hex": PICTURE.hex()})
    await rig.replies(chat, 1)
    [message] = rig.responder.turns[0].messages
    assert "could not be fetched: too large (10.0 KB > 1000 bytes)" in message.text


async def test_the_update_is_confirmed_before_its_file_is_downloaded(open_rig):
    """Downloading before the ack cannot meet a 3-second webhook deadline and stalls the poll loop behind
    a slow file server.  With the file server stuck, the update must still be confirmed (the next
    getUpdates asks past it) and the words of the next message still taken; the file follows later."""
    rig = await open_rig()
    await rig.users.faults(file_hold=True)
    chat = new_id()
    sent = await rig.users.say(chat, "my homework", media={"kind": "document", "name": "hw.pdf", "hex": b"%PDF-1".hex()})

    async def confirmed():
        polls = (await rig.users.info())["polls"]
        return any(offset > sent["update_id"] for offset in polls)

    await eventually(confirmed, what="the update confirmed while its file cannot be downloaded")
    assert (await rig.users.info())["downloads"] == []
    assert rig.responder.turns == []  # the turn waits for the file, not the ack
    await rig.users.faults(file_hold=False)
    await rig.replies(chat, 1)
    [message] = rig.responder.turns[0].messages
    assert await rig.gateway.blobs.get(media_of(message).blob or "") == b"%PDF-1"
    [account] = (await rig.gateway.status()).accounts
    assert account.restarts == 0


async def test_a_file_server_that_fails_gives_a_note_and_exactly_one_answer(open_rig):
    rig = await open_rig()
    await rig.users.faults(file_status=500)
    chat = new_id()
    await rig.users.say(chat, "see my drawing", media={"kind": "photo", "hex": PICTURE.hex()})
    await rig.replies(chat, 1)
    await rig.quiet()
    [turn] = rig.responder.turns
    [message] = turn.messages
    assert media_of(message).blob is None
    assert "could not be fetched: telegram did not hand it over (file download answered HTTP 500)" in message.text
    assert len((await rig.users.seen())[str(chat)]) == 1


async def test_a_file_telegram_gives_no_path_for_is_not_found_not_a_crash():
    """``file_path`` is optional in getFile's answer; without it there is nothing to download from."""
    import httpx
    import pytest
    from telegram import File

    from channels.telegram.media import fetch
    from gateway.core.errors import NotFound
    from gateway.core.messages import MediaRef

    class Bot:
        async def get_file(self, file_id):
            return File(file_id=file_id, file_unique_id="u1", file_size=10)

    async with httpx.AsyncClient() as http:
        with pytest.raises(NotFound, match="no path"):
            async with fetch(Bot(), http, MediaRef(locator="doc-1", name="essay.txt"), limit=1000):
                pass


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


async def test_a_part_given_up_for_good_is_not_remembered_forever(open_rig, tmp_path):
    """What a part already has on screen is kept for its retries; a part that can never be sent has no
    retries, and remembering it anyway grew the account's memory by one entry per failed reply."""
    rig = await open_rig()
    rig.responder.attachments = (Attachment(kind="file", path=str(tmp_path / "deleted.pdf"), name="deleted.pdf"),)
    chat = new_id()
    await rig.users.say(chat, "the worksheet please")
    await rig.replies(chat, 1)  # the text goes out; the file cannot
    await rig.quiet()
    assert [m["kind"] for m in (await rig.users.seen())[str(chat)]] == ["text"]
    assert rig.channel._progress == {}


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
