"""Socket Mode: the gateway dials out, takes events as envelopes and acks each after it is durable.

Everything here goes through slack-bolt and slack_sdk over a real WebSocket
and HTTP to the emulator: threads, native streams and their fallback, the
assistant surface, files both ways, Slack's errors in 200 bodies, its rate
tiers, dropped sockets and unacked envelopes, and several apps at once.
"""

from __future__ import annotations

import httpx
import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.errors import AuthFailed, NotFound, RateLimited
from gateway.core.messages import Attachment, Media, Referrer, RenderedPart
from tests.contract.harness import ContractResponder, counter, eventually
from tests.contract.slack_harness import SlackHarness
from tests.waits import HTTP_S


def calls(info: dict, method: str) -> list[dict]:
    return [c for c in info["calls"] if c["method"] == method and c["outcome"] == "ok"]


async def test_a_mention_in_a_channel_is_streamed_natively_into_a_new_thread(open_rig):
    rig = await open_rig()
    rig.responder.stream = ["Primes have ", "exactly two ", "divisors: *one* and themselves."]
    rig.responder.delta_delay = 1.2  # past min_edit_interval, so each delta is shown while it streams
    said = await rig.harness.say("what is a prime?", group=True, mention=True)
    [reply] = await rig.replies(said.chat, 1)
    await rig.quiet()
    asked = rig.responder.turns[0].messages[0]
    info = await rig.users.app()
    [start] = calls(info, "chat.startStream")
    assert start["params"]["thread_ts"] == asked.referrer.message == reply["thread_ts"]
    assert start["params"]["recipient_user_id"] == said.user  # a channel stream names who it is for
    assert calls(info, "chat.appendStream"), "the answer was not streamed while it was written"
    assert len(calls(info, "chat.stopStream")) == 1
    [message] = (await rig.users.seen())[said.chat]
    assert not message["streaming"]
    assert message["text"] == "Primes have exactly two divisors: _one_ and themselves."  # mrkdwn at the end


async def test_a_workspace_without_native_streams_gets_one_message_edited_in_place(open_rig):
    rig = await open_rig(app={"streaming": False})
    rig.responder.stream = ["Thinking", " it over:", " yes."]
    rig.responder.delta_delay = 1.2
    said = await rig.harness.say("can you stream?", group=True, mention=True)
    await rig.replies(said.chat, 1)
    await rig.quiet()
    info = await rig.users.app()
    assert not calls(info, "chat.startStream")
    assert calls(info, "chat.update")
    [message] = (await rig.users.seen())[said.chat]
    assert message["text"] == "Thinking it over: yes."


async def test_an_assistant_thread_shows_the_thinking_status_and_offers_suggested_prompts(open_rig):
    rig = await open_rig(suggested_prompts=["Explain fractions", "Quiz me"])
    await rig.users.event({"type": "assistant_thread_started", "assistant_thread": {
        "user_id": "U42", "channel_id": "D42", "thread_ts": "1700000001.000100", "context": {}}})
    info = await eventually(lambda: _with(rig, "prompts"), what="the suggested prompts")
    assert [p["title"] for p in info["prompts"][0]["prompts"]] == ["Explain fractions", "Quiz me"]
    rig.responder.stream = ["Let me see", " ... 3/4."]
    rig.responder.delta_delay = 0.3
    await rig.users.say("D42", "what is 6/8 simplified?", user="U42", thread_ts="1700000001.000100")
    await rig.replies("D42", 1)
    info = await rig.users.app()
    assert any(s["status"] == "is thinking…" and s["thread_ts"] == "1700000001.000100" for s in info["statuses"])
    [message] = (await rig.users.seen())["D42"]
    assert message["thread_ts"] == "1700000001.000100"


async def _with(rig, key: str) -> dict | None:
    info = await rig.users.app()
    return info if info[key] else None


async def test_a_shared_file_arrives_as_a_reference_fetched_only_with_the_bot_token(open_rig):
    rig = await open_rig()
    await rig.users.say("D7", "here is my homework", user="U7",
                        files=[{"name": "homework.png", "mimetype": "image/png", "hex": "89504e470d0a"}])
    await rig.replies("D7", 1)
    [media] = [e for e in rig.responder.turns[0].messages[0].elements if isinstance(e, Media)]
    assert media.kind == "image" and media.name == "homework.png" and media.url is None
    assert media.ref is not None and "/files-pri/" in media.ref.locator
    assert media.blob is not None and await rig.gateway.blobs.get(media.blob) == bytes.fromhex("89504e470d0a")
    async with httpx.AsyncClient(timeout=HTTP_S, trust_env=False) as http:
        assert (await http.get(media.ref.locator)).status_code == 403  # not without the token


async def test_a_file_on_disk_is_uploaded_into_the_thread_in_the_three_documented_steps(open_rig, tmp_path):
    rig = await open_rig()
    worksheet = tmp_path / "worksheet.pdf"
    worksheet.write_bytes(b"%PDF-1.4 fractions")
    rig.responder.attachments = (Attachment(kind="file", path=str(worksheet), name="worksheet.pdf"),)
    said = await rig.harness.say("a worksheet please", group=True, mention=True)
    await rig.replies(said.chat, 2)
    await rig.quiet()
    shown = (await rig.users.seen())[said.chat]
    [upload] = [m for m in shown if m["files"]]
    assert upload["files"][0]["name"] == "worksheet.pdf" and upload["files"][0]["size"] == len(b"%PDF-1.4 fractions")
    assert upload["thread_ts"] == rig.responder.turns[0].messages[0].referrer.message
    info = await rig.users.app()
    assert calls(info, "files.getUploadURLExternal") and calls(info, "files.completeUploadExternal")


@pytest.mark.parametrize("error, raised", [("invalid_auth", AuthFailed), ("channel_not_found", NotFound)])
async def test_an_error_in_a_200_body_is_translated(open_rig, error, raised):
    rig = await open_rig()
    said = await rig.harness.say("hi")
    await rig.replies(said.chat, 1)
    target = rig.responder.turns[0].messages[0].address
    await rig.harness.fail_next_send(error)
    with pytest.raises(raised) as caught:
        await rig.channel.send(target, RenderedPart(index=0, text="direct"), referrer=Referrer(), idempotency_key="k")
    assert caught.value.code == error and "HTTP 200" in str(caught.value)


async def test_the_rate_tier_of_chat_post_message_is_met_with_retry_after(open_rig):
    rig = await open_rig()
    said = await rig.harness.say("hi")
    await rig.replies(said.chat, 1)
    await rig.quiet()
    target = rig.responder.turns[0].messages[0].address
    await rig.users.settings(enforce_limits=True)
    with pytest.raises(RateLimited) as caught:
        for index in range(10):  # one per second per channel, a short burst allowed
            await rig.channel.send(target, RenderedPart(index=0, text=f"burst {index}"), referrer=Referrer(),
                                   idempotency_key=f"burst-{index}")
    assert caught.value.retry_after >= 1
    assert (await rig.users.app())["rate_limited"] == 1  # the SDK did not retry it by itself


@pytest.mark.parametrize("refresh", [True, False], ids=["refresh-requested", "socket-cut"])
async def test_after_the_socket_drops_the_account_reconnects_and_answers_what_was_said_meanwhile(open_rig, refresh):
    rig = await open_rig(socket_grace_s=1)
    first = await rig.harness.say("before the drop")
    await rig.replies(first.chat, 1)
    await rig.users.drop(refresh=refresh)
    said = await rig.harness.say("after the drop", chat=first.chat)
    await rig.replies(first.chat, 2, what="the answer after the reconnect")
    await rig.quiet()
    assert [m.text for t in rig.responder.turns for m in t.messages] == ["before the drop", "after the drop"]
    assert (await rig.users.app())["connections_opened"] >= 2
    assert said.chat == first.chat


async def test_an_envelope_left_unacked_is_redelivered_and_answered_once(open_rig):
    rig = await open_rig()
    rig.responder.stream = []
    said = await rig.harness.say("are you there?")
    await rig.replies(said.chat, 1)
    await rig.harness.say_again(said)  # Slack's redelivery: a new envelope, retry_attempt 1, same event
    await eventually(lambda: counter(rig.gateway, "partners_dedup_hits_total", channel="slack") >= 1,
                     what="the redelivery to be recognised")
    await eventually(lambda: _acked(rig), what="every envelope to be acked")
    await rig.quiet()
    assert len(rig.responder.turns) == 1


async def _acked(rig) -> bool:
    return not (await rig.users.app())["pending"]


async def test_an_envelope_is_acked_only_once_its_event_is_stored(open_rig):
    rig = await open_rig()
    rig.responder.stream = ["slow", " answer"]
    rig.responder.delta_delay = 2.0  # the turn is still running when the ack is checked
    said = await rig.users.say("D77", "remember this", user="U77")
    await eventually(lambda: _acked(rig), what="the envelope to be acked")
    assert rig.stored(f"D77:{said['ts']}")  # durable before Slack was told it arrived


async def test_edits_and_joins_are_acknowledged_and_not_answered(open_rig):
    rig = await open_rig()
    await rig.users.event({"type": "message", "subtype": "message_changed", "channel": "D9", "ts": "1700000002.000100",
                           "channel_type": "im", "message": {"text": "edited"}})
    await rig.users.event({"type": "reaction_added", "user": "U9", "reaction": "thumbsup"})
    await eventually(lambda: _acked(rig), what="both events to be acked")
    said = await rig.harness.say("a real question", chat="D9")
    await rig.replies(said.chat, 1)
    assert len(rig.responder.turns) == 1


async def test_one_gateway_serves_two_workspaces_each_through_its_own_app(slack_api, tmp_path):
    schools = [SlackHarness(slack_api), SlackHarness(slack_api)]
    for harness in schools:
        await harness.start(tmp_path)
    accounts = {f"school{i}": {"bot_token": f"env:{h.env['bot']}", "app_token": f"env:{h.env['app']}",
                               "api_base": f"{slack_api}/api/", "access": {"dm": "open"}} for i, h in enumerate(schools)}
    config = parse_config({"data_dir": str(tmp_path / "data"), "partners": [{"id": "tutor", "name": "Tutor"}],
                           "bindings": [{"partner": "tutor", "channel": "slack", "account": a} for a in accounts],
                           "channels": {"slack": accounts}, "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1}})
    gateway = Gateway(config, responder=ContractResponder())
    await gateway.start()
    try:
        one = await schools[0].say("from the first school")
        two = await schools[1].say("from the second school")
        [a] = await eventually(lambda: _shown(schools[0], one.chat), what="the first school's answer")
        [b] = await eventually(lambda: _shown(schools[1], two.chat), what="the second school's answer")
        assert a["text"] == "echo: from the first school" and b["text"] == "echo: from the second school"
        assert one.chat not in await schools[1].users.seen() and two.chat not in await schools[0].users.seen()
    finally:
        await gateway.stop()
        for harness in schools:
            await harness.stop()


async def _shown(harness: SlackHarness, chat: str) -> list[dict] | None:
    return (await harness.users.seen()).get(chat) or None


async def test_where_the_group_policy_says_always_every_channel_message_is_answered_in_its_thread(open_rig):
    rig = await open_rig(access={"dm": "open", "group": "always"})
    said = await rig.harness.say("no mention at all", group=True)
    [reply] = await rig.replies(said.chat, 1)
    [turn] = rig.responder.turns
    assert not turn.messages[0].addressed  # answered by the policy, not because it was addressed
    assert reply["thread_ts"] == turn.messages[0].referrer.message
