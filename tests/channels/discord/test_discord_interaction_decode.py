"""An interaction's JSON -> InboundMessage: the one decode both the Gateway and the HTTP endpoint use; the key setting."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from channels.discord.config import DiscordConfig
from channels.discord.decode import INTERACTION, InteractionPayload, decode_interaction
from gateway.core.errors import InvalidEvent
from gateway.core.messages import AccountId, ConversationKind
from tests.contract.discord_harness import new_token
from tests.peers.discord_server import DiscordPeer

ACCOUNT = AccountId("main")


def decoded(interaction: dict):
    return decode_interaction(InteractionPayload.model_validate(interaction), account=ACCOUNT, token_lifetime_s=900)


def test_an_ask_in_a_dm_is_the_question_from_its_user_with_the_token_for_followups():
    peer = DiscordPeer()
    ask = peer.interaction("ask", {"question": "What is 7 x 8?"}, user="4242")
    message = decoded(ask)
    assert message.event_id == ask["id"] and message.addressed
    assert message.address.conversation.kind is ConversationKind.DIRECT
    assert message.address.conversation.chat == ask["channel_id"]
    assert message.sender.user == "4242" and message.sender.locale == "en-US"
    assert message.elements[0].text == "What is 7 x 8?"  # type: ignore[union-attr]
    expiry, _, token = (message.referrer.token or "").removeprefix(INTERACTION).partition(":")
    assert token == ask["token"] and int(expiry) == int(message.received_at.timestamp()) + 900


async def test_a_command_in_a_thread_is_the_threads_conversation_and_names_the_member():
    peer = DiscordPeer()
    thread = await peer.open_thread("Fractions")  # no session: nothing is dispatched
    link = peer.interaction("link", {"code": "ABC123"}, user="77", channel=thread)
    message = decoded(link)
    where = message.address.conversation
    assert (where.kind, where.chat, where.thread, where.title) == (ConversationKind.GROUP, peer.channel_id, thread, "Fractions")
    assert message.sender.user == "77"
    assert message.elements[0].text == "/link ABC123"  # type: ignore[union-attr]


@pytest.mark.parametrize("name, kind", [("dance", 2), ("ask", 3), ("ask", 4)])
def test_a_command_we_did_not_register_or_another_interaction_type_is_invalid(name, kind):
    with pytest.raises(InvalidEvent, match="not a command the gateway answers"):
        decoded(DiscordPeer().interaction(name, kind=kind))


def test_an_interaction_without_its_fields_does_not_validate():
    with pytest.raises(ValidationError):
        InteractionPayload.model_validate({"type": 2, "data": {"name": "ask"}})


@pytest.mark.parametrize("key", ["abc", "z" * 64, "0" * 63, new_token()])
def test_a_public_key_that_is_not_64_hex_digits_is_a_clear_config_error(key):
    with pytest.raises(ValidationError, match="64 hex digits"):
        DiscordConfig(token=SecretStr(new_token()), public_key=key)
    assert DiscordConfig(token=SecretStr(new_token()), public_key=DiscordPeer().public_key).public_key
