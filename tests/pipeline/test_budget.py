"""What a platform takes of one reply, enforced by the outbound path: messages per inbound, file size.

Through the real gateway -- dispatcher, lanes, outbox, delivery -- with the
in-memory channel as the platform; the teacher is an owner on the same
account, so what they are told is what the channel was asked to send them.
"""

from __future__ import annotations

from gateway.app import Gateway
from gateway.core.capabilities import Dialect, EditMode, TextUnit
from gateway.core.events import StreamEnd, TurnEnd
from gateway.core.messages import Attachment, MessageId, OutboundReply, Referrer, RenderedPart, ReplyAuthor
from gateway.pipeline.budget import fit_budget, messages_of
from gateway.store import ReplyState
from tests.pipeline.conftest import ScriptedResponder, make_config
from tests.pipeline.memory_channel import DEFAULT_CAPS, MemoryChannel

TEACHER = {"owners": [{"channel": "memory", "user": "teacher", "account": "acct"}]}
PARAGRAPHS = [f"Step {n}: " + "work through it slowly " * 6 for n in range(1, 8)]  # ~140 chars: one part each


class FilesChannel(MemoryChannel):
    """The memory platform, also keeping the files each send carried (a file is a part of its own)."""

    def __init__(self, context):
        super().__init__(context)
        self.files: list[tuple[str, ...]] = []

    async def send(self, target, part, *, referrer, idempotency_key):
        sent = await super().send(target, part, referrer=referrer, idempotency_key=idempotency_key)
        if part.attachments:
            self.files.append(tuple(a.name for a in part.attachments))
        return sent


class Answer(ScriptedResponder):
    def __init__(self, markdown: str, attachments: tuple[Attachment, ...] = ()) -> None:
        super().__init__()
        self.markdown, self.attachments = markdown, attachments

    async def respond(self, turn):
        yield StreamEnd(markdown=self.markdown, attachments=self.attachments)
        yield TurnEnd()


async def start(tmp_path, responder, **caps) -> tuple[Gateway, FilesChannel]:
    FilesChannel.caps = DEFAULT_CAPS.model_copy(update={"edit_mode": EditMode.NONE, **caps})
    gateway = Gateway(make_config(tmp_path, partner=TEACHER), responder=responder, channel_classes={"memory": FilesChannel})
    await gateway.start()
    return gateway, gateway.channel("memory", "acct")


def to(chat: str, channel: MemoryChannel) -> list[str]:
    """The texts sent to ``chat``; a file goes as a part of its own with no text (see ``channel.files``)."""
    return [s.text for s in channel.sent if s.chat == chat and s.text]


async def reply_row(gateway: Gateway, message):
    from gateway.pipeline.outbox import reply_key

    return await gateway.store.get_reply(reply_key(message.address, message.event_id))


async def test_a_reply_over_the_budget_sends_its_first_parts_records_why_and_tells_the_teacher(tmp_path):
    gateway, channel = await start(tmp_path, Answer("\n\n".join(PARAGRAPHS)), replies_per_inbound=5)
    try:
        message = await channel.inject("explain it all", chat="kid", user="kid")
        await channel.wait_for(lambda sent: any(s.chat == "teacher" for s in sent) and len(to("kid", channel)) >= 5)
        learner = to("kid", channel)
        assert learner == [p.strip() for p in PARAGRAPHS[:5]]
        report = to("teacher", channel)[0]
        assert "could not be sent whole" in report and "2 of 7 text parts left out" in report
        assert "memory takes 5 messages in answer to one message" in report
        row = await reply_row(gateway, message)
        assert row.state is ReplyState.DELIVERED and "2 of 7 text parts left out" in row.last_error
        account = (await gateway.status()).accounts[0]
        assert account.undelivered == 1 and "left out" in account.last_undelivered
        assert b'partners_replies_short_total{account="acct",channel="memory"} 1.0' in gateway.metrics.render()
    finally:
        await gateway.stop()


async def test_the_budget_belongs_to_the_learners_message_and_is_shared_by_every_reply_to_it(tmp_path):
    """QQ takes five messages in answer to one message, whoever writes them: the partner's answer, then
    a teacher's words to the same message, each get what the others left; with nothing left the reply is
    not sent, its row says why and the teacher is told."""
    gateway, channel = await start(tmp_path, Answer("\n\n".join(PARAGRAPHS[:3])), replies_per_inbound=5)
    try:
        message = await channel.inject("explain", chat="kid", user="kid", referrer=Referrer(message=MessageId("pm1")))
        await channel.wait_for(lambda sent: len(to("kid", channel)) >= 3)
        await gateway.lanes.drain()

        def words(key: str, paragraphs: list[str]) -> OutboundReply:
            return OutboundReply(idempotency_key=key, target=message.address, referrer=message.referrer,
                                 markdown="\n\n".join(paragraphs), author=ReplyAuthor.TEACHER)

        await gateway.outbox.post(words("teacher-1", PARAGRAPHS[3:7]))
        await channel.wait_for(lambda sent: any(s.chat == "teacher" for s in sent))
        await gateway.lanes.drain()
        assert to("kid", channel) == [p.strip() for p in PARAGRAPHS[:5]]  # 3 + the 2 the budget had left
        report = to("teacher", channel)[0]
        assert "memory takes 5 messages in answer to one message, 3 of them already sent," in report
        first = await gateway.store.get_reply("teacher-1")
        assert first is not None and first.state is ReplyState.DELIVERED and first.parts_sent == 2

        await gateway.outbox.post(words("teacher-2", PARAGRAPHS[:1]))
        await channel.wait_for(lambda sent: len(to("teacher", channel)) >= 2)
        await gateway.lanes.drain()
        assert len(to("kid", channel)) == 5  # nothing more: the learner's message has had its five
        second = await gateway.store.get_reply("teacher-2")
        assert second is not None and second.state is ReplyState.FAILED and "5 of them already sent" in second.last_error
    finally:
        await gateway.stop()


def test_a_spent_budget_keeps_nothing_and_says_so():
    caps = DEFAULT_CAPS.model_copy(update={"replies_per_inbound": 5})
    parts = [RenderedPart(index=0, text="one more thing", plain="one more thing")]
    fitted = fit_budget(parts, caps, already=5)
    assert fitted.parts == [] and "5 of them already sent" in fitted.left_out
    assert fit_budget(parts, caps, already=4).parts == parts


async def test_files_over_the_budget_become_links_in_the_text_and_nothing_is_lost(tmp_path):
    files = tuple(Attachment(kind="file", url=f"https://school.example/{n}.pdf", name=f"{n}.pdf") for n in ("a", "b", "c"))
    gateway, channel = await start(tmp_path, Answer("Here are the worksheets.", files), replies_per_inbound=2,
                                   media_kinds=frozenset({"file"}), media_max_bytes=1 << 20,
                                   elements=frozenset({"text", "link", "file"}))
    try:
        message = await channel.inject("worksheets please", chat="kid", user="kid")
        await channel.wait_for(lambda sent: len(sent) >= 1)
        await gateway.lanes.drain()
        assert to("kid", channel) == ["Here are the worksheets.\n\nb.pdf (https://school.example/b.pdf)"
                                      "\n\nc.pdf (https://school.example/c.pdf)"]
        assert channel.files == [("a.pdf",)]  # the text and one file: two messages, the budget
        assert not to("teacher", channel)
        assert (await reply_row(gateway, message)).last_error is None
    finally:
        await gateway.stop()


async def test_a_reply_within_the_budget_is_untouched(tmp_path):
    gateway, channel = await start(tmp_path, Answer("\n\n".join(PARAGRAPHS[:3])), replies_per_inbound=5)
    try:
        await channel.inject("explain", chat="kid", user="kid")
        await channel.wait_for(lambda sent: len(sent) >= 3)
        await gateway.lanes.drain()
        assert to("kid", channel) == [p.strip() for p in PARAGRAPHS[:3]]
        assert (await gateway.status()).accounts[0].undelivered == 0
    finally:
        await gateway.stop()


async def test_a_local_file_over_the_size_limit_goes_by_name_and_the_teacher_hears_it(tmp_path):
    big = tmp_path / "notes.pdf"
    big.write_bytes(b"%PDF" + b"0" * 4096)
    small = tmp_path / "key.pdf"
    small.write_bytes(b"%PDF small")
    files = (Attachment(kind="file", path=str(big), name="notes.pdf"), Attachment(kind="file", path=str(small), name="key.pdf"))
    gateway, channel = await start(tmp_path, Answer("Your notes.", files), media_kinds=frozenset({"file"}),
                                   media_max_bytes=1024, elements=frozenset({"text", "link", "file"}))
    try:
        message = await channel.inject("my notes", chat="kid", user="kid")
        await channel.wait_for(lambda sent: any(s.chat == "teacher" for s in sent) and to("kid", channel))
        assert to("kid", channel) == ["Your notes.\n\n[file: notes.pdf]"]
        assert channel.files[0] == ("key.pdf",)
        report = to("teacher", channel)[0]
        assert "notes.pdf (4100 bytes)" in report and "1024-byte file limit" in report
        assert "notes.pdf" in (await reply_row(gateway, message)).last_error
    finally:
        await gateway.stop()


async def test_a_file_over_the_size_limit_with_a_url_becomes_its_link(tmp_path):
    big = tmp_path / "video.mp4"
    big.write_bytes(b"0" * 4096)
    files = (Attachment(kind="video", path=str(big), url="https://school.example/video.mp4", name="video.mp4"),)
    gateway, channel = await start(tmp_path, Answer("Watch this.", files), media_kinds=frozenset({"video"}),
                                   media_max_bytes=1024, elements=frozenset({"text", "link", "video"}))
    try:
        await channel.inject("video?", chat="kid", user="kid")
        await channel.wait_for(lambda sent: len(sent) >= 1)
        await gateway.lanes.drain()
        assert to("kid", channel) == ["Watch this.\n\nvideo.mp4 (https://school.example/video.mp4)"]
        assert channel.files == [] and not to("teacher", channel)
    finally:
        await gateway.stop()


def test_adjacent_text_parts_are_joined_where_the_join_fits_the_limit():
    caps = DEFAULT_CAPS.model_copy(update={"replies_per_inbound": 2, "text_limit": 120, "text_unit": TextUnit.CHARS,
                                           "dialect": Dialect.PLAIN})
    parts = [RenderedPart(index=i, text=text) for i, text in enumerate(["a" * 50, "b" * 50, "c" * 100])]
    fitted = fit_budget(parts, caps)
    assert [p.text for p in fitted.parts] == ["a" * 50 + "\n\n" + "b" * 50, "c" * 100]
    assert [p.index for p in fitted.parts] == [0, 1] and fitted.left_out == ""
    assert messages_of(fitted.parts) == 2
