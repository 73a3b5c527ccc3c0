"""The Feishu channel over the long connection: the real lark-oapi client against the emulator."""

from __future__ import annotations

from gateway.core.messages import Media
from tests.contract.harness import eventually
from tests.peers.feishu_server import BOT_OPEN_ID


async def test_a_dm_is_answered_once_on_a_streaming_card_that_ends_streaming(rig):
    r = await rig()
    r.responder.stream = ["Light ", "makes ", "**sugar**."]
    said = await r.server.say("why are leaves green?", user="ou_ann")
    [card] = await r.answers(said.chat, 1)
    assert card.msg_type == "interactive" and card.reply_to == said.message_id
    shown = r.server.cards[card.card]
    assert shown.text == "Light makes **sugar**." and not shown.streaming
    assert shown.updates[-1] == shown.text and len(shown.updates) >= 2
    assert said.event_id in r.server.acked


async def test_a_redelivered_event_is_answered_once(rig):
    r = await rig(stream=False)
    said = await r.server.say("hello", user="ou_bo")
    await r.answers(said.chat, 1)
    await r.server.redeliver(said)
    await eventually(lambda: r.server.acked.count(said.event_id) == 2, what="the second ack")
    await r.quiet()
    assert len(r.server.shown(said.chat)) == 1 and r.inbound_rows() == 1


async def test_a_group_answers_only_its_mentions_in_thread_mentioning_the_asker(rig):
    r = await rig(stream=False, reply_in_thread=True)
    await r.server.say("chatter among learners", user="ou_cy", chat="oc_class", group=True)
    said = await r.server.say("what is 2+2?", user="ou_cy", chat="oc_class", group=True, mention=True)
    [answer] = await r.answers("oc_class", 1)
    assert answer.reply_to == said.message_id and answer.in_thread
    md = answer.content["zh_cn"]["content"][0][0]["text"]
    assert md.startswith('<at user_id="ou_cy"></at> ') and "what is 2+2?" in md
    [turn] = r.responder.turns
    assert BOT_OPEN_ID not in turn.messages[0].text


async def test_an_image_is_fetched_after_the_ack_and_a_file_goes_out_uploaded(rig, tmp_path):
    r = await rig(stream=False)
    r.server.resources["img_in1"] = b"\x89PNG\r\n\x1a\nfeishu"
    picture = tmp_path / "chart.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\nchart")
    from gateway.core.messages import Attachment

    r.responder.attachments = (Attachment(kind="image", path=str(picture), name="chart.png", mime_type="image/png"),)
    said = await r.server.say("", user="ou_di", message_type="image", content={"image_key": "img_in1"})
    shown = await r.answers(said.chat, 2)
    assert {s.msg_type for s in shown} == {"post", "image"}
    [image] = [s for s in shown if s.msg_type == "image"]
    assert r.server.uploads[image.content["image_key"]] == picture.read_bytes()
    [turn] = r.responder.turns
    media = [e for e in turn.messages[0].elements if isinstance(e, Media)]
    assert media and media[0].blob and media[0].kind == "image"
