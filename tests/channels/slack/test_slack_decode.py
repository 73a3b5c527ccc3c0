"""Slack event -> InboundMessage: mrkdwn read back into elements, where the conversation is, what is skipped."""

from __future__ import annotations

import pytest

from channels.slack.decode import Me, Skipped, decode
from gateway.core.errors import InvalidEvent
from gateway.core.messages import AccountId, ConversationKind, Link, Media, Mention

ME = Me(user="UBOT", bot="BBOT", team="T1")


def message(**fields) -> dict:
    return {"type": "message", "channel": "C1", "user": "U1", "text": "hi", "ts": "1700000000.000100",
            "channel_type": "channel", **fields}


def test_a_mention_of_the_bot_addresses_it_and_is_set_aside_from_what_was_said():
    decoded = decode(message(text="<@UBOT> what is 7 &amp; 8?"), account=AccountId("a"), me=ME)
    assert decoded.addressed
    assert isinstance(decoded.elements[0], Mention) and decoded.elements[0].is_self
    assert decoded.text == "what is 7 & 8?"


def test_links_channels_and_other_people_are_read_as_a_reader_sees_them():
    decoded = decode(message(text="see <https://ex.org/a?b=1&amp;c=2|the guide> in <#C9|maths>, <@U2>"),
                     account=AccountId("a"), me=ME)
    [link] = [e for e in decoded.elements if isinstance(e, Link)]
    assert link.url == "https://ex.org/a?b=1&c=2" and link.text == "the guide"
    assert "#maths" in decoded.text
    assert not decoded.addressed


def test_every_channel_thread_is_a_conversation_and_a_top_level_message_opens_one():
    top = decode(message(), account=AccountId("a"), me=ME)
    reply = decode(message(ts="1700000001.000100", thread_ts="1700000000.000100"), account=AccountId("a"), me=ME)
    assert top.address.conversation.thread == "1700000000.000100" == reply.address.conversation.thread
    assert top.address.conversation.kind is ConversationKind.GROUP


def test_a_dm_is_one_conversation_and_an_assistant_thread_its_own():
    dm = decode(message(channel="D1", channel_type="im"), account=AccountId("a"), me=ME)
    pane = decode(message(channel="D1", channel_type="im", thread_ts="1699999999.000100"), account=AccountId("a"), me=ME)
    assert dm.address.conversation.kind is ConversationKind.DIRECT and dm.addressed
    assert dm.address.conversation.thread is None and pane.address.conversation.thread == "1699999999.000100"


def test_the_message_and_its_app_mention_copy_share_one_event_id():
    plain = decode(message(text="<@UBOT> hi"), account=AccountId("a"), me=ME)
    mention = decode({**message(text="<@UBOT> hi"), "type": "app_mention"}, account=AccountId("a"), me=ME)
    assert plain.event_id == mention.event_id == "C1:1700000000.000100"


def test_the_bots_own_post_is_marked_as_its_own():
    assert decode(message(user="UBOT", bot_id="BBOT"), account=AccountId("a"), me=ME).from_self


def test_shared_files_are_references_for_after_the_ack():
    decoded = decode(message(subtype="file_share", text="", files=[
        {"name": "a.png", "mimetype": "image/png", "size": 3, "url_private": "https://files/a.png"}]),
        account=AccountId("a"), me=ME)
    [media] = decoded.elements
    assert isinstance(media, Media) and media.ref is not None and media.ref.locator == "https://files/a.png" and media.url is None


@pytest.mark.parametrize("subtype", ["message_changed", "channel_join", "message_deleted"])
def test_edits_joins_and_deletions_are_skipped(subtype):
    with pytest.raises(Skipped):
        decode(message(subtype=subtype), account=AccountId("a"), me=ME)


@pytest.mark.parametrize("broken", [{"channel": 5}, {"ts": None}, {"ts": "yesterday"}, {"user": None}])
def test_a_malformed_event_is_invalid_not_a_crash(broken):
    with pytest.raises(InvalidEvent):
        decode(message(**broken), account=AccountId("a"), me=ME)
