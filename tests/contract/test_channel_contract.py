"""The channel contract: one body of tests, run against every channel's harness.

Each test starts the channel's peer, a real in-process Gateway on the durable
SQLite path with :class:`ContractResponder`, and speaks to the gateway only
through the peer -- the way the platform's users would.
"""

from __future__ import annotations

import re

import pytest

from channels._kit.http_errors import FALLBACK_RETRY_S
from channels.base import Channel
from channels.registry import load_channel
from gateway.app import Gateway
from gateway.core.capabilities import Dialect, EditMode, TextUnit
from gateway.core.errors import AuthFailed, BadRequest, PeerUnavailable, RateLimited, TransientError, Unsupported
from gateway.core.messages import ELEMENT_KINDS, Attachment, ConversationKind, Mention, Referrer, RenderedPart, StreamChunk
from gateway.core.probes import Gravity
from gateway.doctor import probe_account
from gateway.render import render_twins
from tests.contract.harness import (
    HARNESSES,
    ContractResponder,
    Rig,
    counter,
    eventually,
    harness_class,
    text_of,
    units,
    with_feature,
)

ALL = sorted(HARNESSES)


@pytest.fixture
async def rig(request, tmp_path):
    harness = harness_class(request.param).create(request)
    await harness.start(tmp_path)
    responder = ContractResponder()
    gateway = Gateway(harness.gateway_config(tmp_path / "data"), responder=responder)
    await gateway.start()
    try:
        await harness.attach(gateway)
        assert gateway.channel(harness.channel, harness.account) is not None, gateway.unavailable
        yield Rig(harness, gateway, responder)
    finally:
        await harness.stop()
        await gateway.stop()


def rigs(names: list[str]):
    return pytest.mark.parametrize("rig", names, indirect=True)


def caps_of(rig: Rig):
    """The running account's facts: its kind's row where the platform has kinds (WeChat, ADR 0033)."""
    channel = rig.gateway.channel(rig.harness.channel, rig.harness.account)
    return channel.declared if channel is not None else load_channel(rig.harness.channel).capabilities()


def visible(text: str, dialect: Dialect) -> str:
    """What a reader sees of a part: markup removed, entities decoded."""
    if dialect in (Dialect.HTML, Dialect.TELEGRAM_HTML):
        import html

        text = html.unescape(re.sub(r"<[^>]+>", "", text))
    if dialect is Dialect.MARKDOWN:  # [label](url) shows its label; emphasis marks and escapes are not seen
        text = re.sub(r"!?\[([^\]]*)\]\(<?([^)>]*)>?\)", r"\1", text)
        text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|~>])", r"\1", text.replace("**", "").replace("__", ""))
    return text


# --------------------------------------------------------------------------- declarations


@pytest.mark.parametrize("name", ALL)
def test_declared_capabilities_are_consistent(name):
    channel = harness_class(name).channel  # a harness per account kind where the platform has kinds (weixin_ilink)
    caps = load_channel(channel).capabilities()
    assert caps.platform == channel
    assert caps.text_limit > 0
    assert isinstance(caps.text_unit, TextUnit) and isinstance(caps.dialect, Dialect)
    assert caps.min_edit_interval >= 0
    assert caps.elements <= set(ELEMENT_KINDS), caps.elements - set(ELEMENT_KINDS)
    assert "text" in caps.elements
    if caps.media_kinds:
        assert caps.media_max_bytes > 0
        assert caps.media_kinds <= caps.elements
    cls = load_channel(channel)

    def implements(method: str) -> bool:
        return getattr(cls, method) is not getattr(Channel, method)

    streams = [implements(m) for m in ("start", "append", "finish")]
    assert all(streams) or not any(streams), "a native stream is start, append and finish together"
    if caps.edit_mode is EditMode.EDIT:
        assert implements("edit"), "edit_mode = edit needs Channel.edit"
    if caps.edit_mode is EditMode.NATIVE_STREAM:
        assert all(streams), "edit_mode = native_stream needs Channel.start/append/finish"
    if caps.edit_mode is EditMode.NONE:
        assert not implements("edit") and not any(streams), "edit_mode = none, yet the channel edits or streams"
    for rate in (caps.send_rate_chat, caps.send_rate_group, caps.send_rate_global):
        if rate is not None:
            assert rate.rate > 0 and rate.per > 0 and rate.burst >= 1
    assert caps.redelivery_horizon_s > 0
    assert caps.inbound_modes


# --------------------------------------------------------------------------- inbound


@rigs(ALL)
async def test_text_in_is_normalized_and_answered(rig: Rig):
    said = await rig.harness.say("hello there, partner")
    seen = await rig.replies(said.chat, 1)
    [turn] = rig.responder.turns
    [message] = turn.messages
    assert message.address.channel == rig.harness.channel
    assert message.address.account == rig.harness.account
    assert message.address.conversation.chat == said.chat
    assert message.address.conversation.kind is ConversationKind.DIRECT
    assert message.sender.user == said.user
    assert message.text == "hello there, partner"
    assert message.addressed and not message.from_self
    assert turn.partner.id == "tutor"
    assert visible(seen[0].text, caps_of(rig).dialect).strip() == "echo: hello there, partner"


@rigs(with_feature("groups"))
async def test_group_message_is_answered_only_when_the_bot_is_mentioned(rig: Rig):
    quiet = await rig.harness.say("just chatting among ourselves", group=True)
    await eventually(lambda: counter(rig.gateway, "partners_dropped_total", channel=rig.harness.channel) >= 1,
                     what="the unaddressed group message to be dropped")
    addressed = await rig.harness.say("what is a prime?", chat=quiet.chat, group=True, mention=True)
    await rig.replies(quiet.chat, 1)
    await rig.quiet()
    [turn] = rig.responder.turns
    [message] = turn.messages
    assert message.address.conversation.kind is ConversationKind.GROUP
    assert message.address.conversation.chat == addressed.chat
    assert message.addressed
    assert any(isinstance(e, Mention) and e.is_self for e in message.elements)
    assert len(await rig.harness.seen(quiet.chat)) == 1


@rigs(with_feature("own_echo"))
async def test_own_messages_are_ignored(rig: Rig):
    said = await rig.harness.say("first question")
    await rig.replies(said.chat, 1)
    await rig.harness.say_as_bot("a message from the bot's own account", chat=said.chat)
    # the platform echoes the bot's reply and delivers the bot-authored message: both are dropped
    await eventually(
        lambda: counter(rig.gateway, "partners_dropped_total", channel=rig.harness.channel, reason="own message") >= 2,
        what="the bot's own messages to be dropped",
    )
    await rig.quiet()
    assert len(rig.responder.turns) == 1
    assert len(await rig.harness.seen(said.chat)) == 1


@rigs(ALL)
async def test_redelivered_event_is_answered_once(rig: Rig):
    said = await rig.harness.say("are you there?")
    await rig.replies(said.chat, 1)
    await rig.harness.say_again(said)
    await eventually(lambda: counter(rig.gateway, "partners_dedup_hits_total", channel=rig.harness.channel) >= 1,
                     what="the redelivery to be recognised")
    await rig.quiet()
    assert len(rig.responder.turns) == 1
    assert len(await rig.harness.seen(said.chat)) == 1


# --------------------------------------------------------------------------- outbound


def _fit(rig: Rig, length: int) -> str:
    """Markdown whose rendering in the channel's dialect measures ``length`` units."""
    from gateway.render import render_reply

    caps = caps_of(rig)
    probe = text_of(40, caps.text_unit)
    [rendered] = render_reply(probe, caps)
    overhead = units(rendered, caps.text_unit) - units(probe, caps.text_unit)
    return text_of(length - overhead, caps.text_unit)


@rigs(ALL)
@pytest.mark.parametrize("over", [0, 1], ids=["at-limit", "one-over"])
async def test_reply_at_the_limit_is_one_message_and_one_unit_over_is_two(rig: Rig, over: int):
    caps = caps_of(rig)
    answer = _fit(rig, caps.text_limit + over)
    rig.responder.answer = lambda turn: answer
    said = await rig.harness.say("a long answer, please")
    await rig.replies(said.chat, 1 + over)
    await rig.quiet()
    seen = await rig.harness.seen(said.chat)
    assert len(seen) == 1 + over
    assert all(units(s.text, caps.text_unit) <= caps.text_limit for s in seen)
    shown = [visible(s.text, caps.dialect) for s in seen]
    assert "".join(shown).replace(" ", "") == answer.replace(" ", "")


@rigs(ALL)
async def test_streamed_reply_shows_as_one_message(rig: Rig):
    """Preview and final are one message: the preview is edited (or replaced in place), never left behind."""
    if "slow_send" in rig.harness.features:
        await rig.harness.slow_sends(0.3)  # the turn ends while the preview's send is still in flight
    rig.responder.stream = ["Let me think", " about that.", " The answer is 42."]
    said = await rig.harness.say("stream it, please")
    await rig.replies(said.chat, 1)
    await rig.quiet()
    seen = await rig.harness.seen(said.chat)
    assert [visible(s.text, caps_of(rig).dialect).strip() for s in seen] == ["Let me think about that. The answer is 42."]


def rendered(markdown: str, caps, *, final: bool) -> RenderedPart:
    [twin] = render_twins(markdown, caps)
    return RenderedPart(index=0, text=twin.text, plain=twin.plain, final=final)


@pytest.mark.parametrize("rig, where", [*((n, "direct") for n in ALL), *((n, "group") for n in with_feature("groups"))],
                         indirect=["rig"])
async def test_the_declared_stream_mode_shows_one_message_through_the_channel_api(rig: Rig, where: str):
    """The outbound contract itself, called as the outbound path calls it: send + edit by the returned handle
    (edit mode), start + append + finish on an opaque stream handle (native streams), or neither (none) --
    in a direct chat and, where the platform has them, a group (Telegram streams in one, edits in the other)."""
    group = where == "group"
    said = await rig.harness.say("hi", group=group, mention=group)
    await rig.replies(said.chat, 1)
    await rig.quiet()
    message = rig.responder.turns[0].messages[0]
    target, referrer = message.address, message.referrer
    channel = rig.gateway.channel(rig.harness.channel, rig.harness.account)
    caps = caps_of(rig)
    before = len(await rig.harness.seen(said.chat))
    mode = channel.stream_mode(target)
    first, more, final = (rendered(t, caps, final=f) for t, f in
                          (("Working **on** it", False), ("Working **on** it, nearly", False), ("The answer is 42.", True)))
    if mode is EditMode.NONE:
        with pytest.raises(Unsupported):
            await channel.edit(target, "any", final, referrer=referrer)
        with pytest.raises(Unsupported):
            await channel.start(target, referrer, "contract-stream:p")
        return
    if mode is EditMode.EDIT:
        sent = await channel.send(target, first, referrer=referrer, idempotency_key="contract-stream:p")
        await channel.edit(target, sent.ref, more, referrer=referrer)
        await channel.edit(target, sent.ref, final, referrer=referrer)
    else:
        stream = await channel.start(target, referrer, "contract-stream:p")
        assert stream.handle and stream.target == target
        await channel.append(stream, StreamChunk(delta="Working **on** it", so_far=first))
        await channel.append(stream, StreamChunk(delta=", nearly", so_far=more))
        sent = await channel.finish(stream, final)

    async def final_shown():
        seen = (await rig.harness.seen(said.chat))[before:]
        return seen if seen and visible(seen[-1].text, caps.dialect).strip() == "The answer is 42." else None

    seen = await eventually(final_shown, what="the final text")
    await rig.quiet()
    seen = (await rig.harness.seen(said.chat))[before:]
    assert [visible(s.text, caps.dialect).strip() for s in seen] == ["The answer is 42."]
    assert seen[0].id == sent.message


@rigs(ALL)
async def test_unsupported_elements_degrade_to_text(rig: Rig):
    caps = caps_of(rig)
    rig.responder.answer = lambda turn: "Read **this** [guide](https://example.org/guide) and ![the diagram](https://example.org/d.png)."
    # A platform that takes only uploaded bytes fetches a URL itself: its harness serves the image on loopback.
    cat = await rig.harness.media_url("cat.png") if "fetches_media" in rig.harness.features else "https://example.org/cat.png"
    rig.responder.attachments = (Attachment(kind="image", url=cat, name="cat.png"),)
    said = await rig.harness.say("show me")
    await rig.replies(said.chat, 1)
    await rig.quiet()
    seen = await rig.harness.seen(said.chat)
    raw = "\n".join(s.text for s in seen)
    text = visible(raw, caps.dialect)
    if caps.dialect is not Dialect.MARKDOWN:
        assert "**" not in raw and "](" not in raw  # no Markdown leaks into a non-Markdown dialect
    assert "**" not in text  # the reader sees bold, not asterisks
    assert "this" in text and "guide" in text and "the diagram" in text
    assert "https://example.org/guide" in raw and "https://example.org/d.png" in raw
    if "link" not in caps.elements:
        assert "https://example.org/guide" in text  # a link the platform cannot show keeps its URL as text
    shown_media = [url for s in seen for url in s.attachments]
    if "image" in caps.media_kinds:
        assert shown_media == [cat]
    elif "link" in caps.elements and caps.dialect is Dialect.MARKDOWN:  # media it cannot take: a link to it (WeCom)
        assert cat in raw and "cat.png" in text
    else:
        assert cat in text  # ... else as its URL, in the text


@rigs(with_feature("faults"))
async def test_rate_limited_send_arrives_once_after_retry_after(rig: Rig):
    await rig.harness.fail_next_send(429, retry_after=0.3)
    said = await rig.harness.say("busy day?")
    await rig.replies(said.chat, 1)
    await rig.quiet()
    assert await rig.harness.rate_limited_sends() == 1
    seen = await rig.harness.seen(said.chat)
    assert len(seen) == 1
    assert "busy day?" in seen[0].text
    assert counter(rig.gateway, "partners_errors_total", channel=rig.harness.channel, kind="RateLimited") == 1



@rigs(with_feature("faults"))
async def test_one_429_is_one_rate_limited_and_one_paced_retry_not_an_sdk_retrying_too(rig: Rig):
    """An SDK's own retry loop is switched off or is the only one: the peer sees the refused send and one retry.

    A second layer (python-telegram-bot's rate limiter, matrix-nio's max_limit_exceeded, an SMTP client's
    resend) would show as a third request, or as a retry the gateway never counted as RateLimited."""
    await rig.harness.fail_next_send(429, retry_after=0.3)
    said = await rig.harness.say("just once more, please")
    await rig.replies(said.chat, 1)
    await rig.quiet()
    assert await rig.harness.rate_limited_sends() == 1
    assert await rig.harness.send_requests() == 2
    assert counter(rig.gateway, "partners_errors_total", channel=rig.harness.channel, kind="RateLimited") == 1
    assert len(await rig.harness.seen(said.chat)) == 1


@rigs(with_feature("faults"))
@pytest.mark.parametrize(
    "status, error",
    [(429, RateLimited), (401, AuthFailed), (503, PeerUnavailable), (400, BadRequest)],
    ids=["429-rate-limited", "401-auth-failed", "503-transient", "400-bad-request"],
)
async def test_platform_errors_are_translated_into_the_error_tree(rig: Rig, status: int, error: type):
    said = await rig.harness.say("hi")
    await rig.replies(said.chat, 1)
    await rig.quiet()
    target = rig.responder.turns[0].messages[0].address
    channel = rig.gateway.channel(rig.harness.channel, rig.harness.account)
    await rig.harness.fail_next_send(status, retry_after=2)
    with pytest.raises(error) as caught:
        await channel.send(target, RenderedPart(index=0, text="sent directly"), referrer=Referrer(), idempotency_key="contract-direct")
    assert caught.value.platform == rig.harness.channel
    if "errcodes" in rig.harness.features:  # WeChat: its own code in a 200, and no retry-after to honour
        assert str(rig.harness.errcode(status)) in str(caught.value)
        if status == 429:  # the platform named no wait: the kit's own fallback, for the outbound path's backoff
            assert caught.value.retry_after == FALLBACK_RETRY_S
    else:
        assert str(status) in str(caught.value)
        if status == 429:
            assert caught.value.retry_after == 2
    assert isinstance(caught.value, TransientError) == (status in (429, 503))


@rigs(with_feature("outage"))
async def test_account_reports_the_outage_and_recovers_without_losing_messages(rig: Rig):
    await rig.harness.outage(True)

    async def failing():
        [account] = (await rig.gateway.status()).accounts
        return account if account.state == "error" else None

    account = await eventually(failing, what="the account to report the outage")
    assert account.reason
    said = await rig.harness.say("anyone home?")
    await rig.harness.outage(False)
    seen = await rig.replies(said.chat, 1, what="replies after the outage")
    assert "anyone home?" in seen[0].text
    [account] = (await rig.gateway.status()).accounts
    assert account.state == "running" and account.restarts >= 1


@rigs(with_feature("lost_response"))
@pytest.mark.parametrize("streamed", [False, True], ids=["final", "streamed-preview"])
async def test_a_send_whose_response_is_lost_still_shows_one_message(rig: Rig, streamed: bool):
    """The platform posted the message but the answer never came back (504): the retry must not add a second."""
    await rig.harness.fail_next_send(504)
    if streamed:
        rig.responder.stream = ["Thinking", " it over:", " yes."]
    said = await rig.harness.say("did it arrive?")
    await rig.replies(said.chat, 1)
    await rig.quiet()
    seen = await rig.harness.seen(said.chat)
    expected = "Thinking it over: yes." if streamed else "echo: did it arrive?"
    assert [visible(s.text, caps_of(rig).dialect).strip() for s in seen] == [expected]


# --------------------------------------------------------------------------- probe (partners doctor)


@rigs(ALL)
async def test_probe_with_the_accounts_own_settings_finds_no_problem(rig: Rig):
    """Asked while the account runs, as `partners doctor` next to a running gateway would."""
    result = await probe_account(rig.harness.gateway_config(rig.gateway.config.data_dir), rig.harness.channel, rig.harness.account)
    assert result.problems == (), result
    assert result.ok and result.checked
    said = await rig.harness.say("still answering after the probe?")
    await rig.replies(said.chat, 1, what="a reply after the probe")  # the probe took nothing from the running account


@pytest.mark.parametrize("name", with_feature("credentials"))
async def test_probe_with_refused_credentials_reports_the_problem_and_its_fix(name, request, tmp_path):
    harness = harness_class(name).create(request)
    await harness.start(tmp_path)
    try:
        config, secret = harness.refused_credentials(tmp_path / "data")
        result = await probe_account(config, harness.channel, harness.account)
    finally:
        await harness.stop()
    assert not result.ok
    errors = [p for p in result.problems if p.gravity is Gravity.ERROR]
    assert errors, result
    for problem in errors:
        assert problem.message and problem.fix
        assert secret not in problem.message and secret not in problem.fix
        assert "Error" not in problem.message, "a library's exception name is not a plain-words message"
