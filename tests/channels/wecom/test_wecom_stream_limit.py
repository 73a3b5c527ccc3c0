"""WeCom's time limit on a stream: the emulator refuses updates after it, as WeCom does after 6 minutes.

The limit is the account's ``stream_limit_s`` and the emulator's, a few seconds here so no test waits
minutes; the channel must finish the stream itself ``stream_margin_s`` before it and send the rest of the
answer to the chat -- nothing lost, nothing twice, no update refused.
"""

from __future__ import annotations

from gateway.core.phrases import CHINESE, ENGLISH, Phrase, say
from tests.channels.wecom.conftest import running
from tests.contract.harness import eventually
from tests.peers.wecom_server import WecomServer

LIMIT = {"stream_limit_s": 3.0, "stream_margin_s": 1.5}


def words(text: str) -> list[str]:
    return text.split()


async def rest_pushed(rig):
    await eventually(lambda: rig.server.pushed, what="the rest of the answer sent to the chat")
    await rig.quiet()
    [stream] = rig.server.answers("learner1")
    [push] = rig.server.pushed
    return stream, push["markdown"]["content"]


async def test_a_slow_streamed_answer_is_finished_before_the_limit_and_the_rest_follows_once(tmp_path):
    async with WecomServer(stream_limit_s=LIMIT["stream_limit_s"]) as server, running(tmp_path, server, **LIMIT) as rig:
        rig.responder.stream = [f"step{i} " for i in range(9)]
        rig.responder.delta_delay = 0.5  # 4.5 s in all: past the limit
        await server.say("explain slowly")
        stream, rest = await rest_pushed(rig)
        phrase = say(Phrase.STREAM_CONTINUES, ENGLISH)
        assert stream.finished == 1 and stream.after_finish == 0
        assert stream.content.endswith(phrase)
        kept = stream.content[: -len(phrase)]
        assert words(kept) and words(rest)  # some of it in the stream, the rest in the message
        assert words(kept) + words(rest) == [f"step{i}" for i in range(9)]  # all of it, once, in order
        assert server.late_updates == 0  # nothing was sent after WeCom stopped taking it
        assert len(rig.responder.turns) == 1


async def test_a_stream_that_waits_on_the_model_is_finished_by_its_timer(tmp_path):
    async with WecomServer(stream_limit_s=LIMIT["stream_limit_s"]) as server, running(tmp_path, server, **LIMIT) as rig:
        rig.responder.stream = ["Let me see. ", "Here it is."]
        rig.responder.delta_delay = 3.5  # no update at all between the first delta and the end, past the limit
        await server.say("a hard one")
        finished_early = await eventually(lambda: [s for s in server.answers("learner1") if s.finished],
                                          what="the stream finished before the answer ended")
        assert not server.pushed  # the stream was finished while the answer was still being written
        stream, rest = await rest_pushed(rig)
        assert finished_early[0] is stream
        phrase = say(Phrase.STREAM_CONTINUES, ENGLISH)
        assert stream.content.endswith(phrase)
        assert words(stream.content[: -len(phrase)]) + words(rest) == words("Let me see. Here it is.")
        assert server.late_updates == 0 and stream.after_finish == 0


async def test_a_chinese_answer_says_in_chinese_that_the_rest_follows(tmp_path):
    async with WecomServer(stream_limit_s=LIMIT["stream_limit_s"]) as server, running(tmp_path, server, **LIMIT) as rig:
        rig.responder.stream = ["名词是", "表示人、", "事物、", "地点的词。", "例如：", "老师、", "学校。"]
        rig.responder.delta_delay = 0.6
        await server.say("什么是名词？")
        stream, rest = await rest_pushed(rig)
        phrase = say(Phrase.STREAM_CONTINUES, CHINESE)
        assert stream.content.endswith(phrase)
        kept = stream.content[: -len(phrase)].strip()
        assert kept + rest.strip() == "".join(rig.responder.stream)  # no spaces to cut at: the prefix as shown
        assert server.late_updates == 0


async def test_a_quick_answer_is_one_finished_stream_and_nothing_else(tmp_path):
    async with WecomServer(stream_limit_s=LIMIT["stream_limit_s"]) as server, running(tmp_path, server, **LIMIT) as rig:
        rig.responder.stream = ["Quick ", "answer."]
        rig.responder.delta_delay = 0.1
        await server.say("fast please")
        [stream] = await rig.answers("learner1", 1)
        await rig.quiet()
        assert stream.content == "Quick answer." and stream.finished == 1
        assert server.pushed == [] and server.late_updates == 0
