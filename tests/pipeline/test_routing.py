"""Routing: the most specific binding wins; unbound accounts route nowhere."""

from gateway.core.config import Binding, PartnerConfig
from gateway.core.messages import AccountId, Address, ChannelName, ChatId, Conversation, ConversationKind
from gateway.pipeline.routing import Router

PARTNERS = [PartnerConfig(id=i, name=i) for i in ("account", "group", "topic")]
ROUTER = Router(PARTNERS, [
    Binding(partner="account", channel="relay", account="a"),
    Binding(partner="group", channel="relay", account="a", chat="g1"),
    Binding(partner="topic", channel="relay", account="a", chat="g1", thread="t9"),
])


def address(chat, thread=None, account="a", channel="relay"):
    return Address(channel=ChannelName(channel), account=AccountId(account),
                   conversation=Conversation(chat=ChatId(chat), kind=ConversationKind.GROUP, thread=thread))


def test_most_specific_binding_wins():
    assert ROUTER.route(address("g1", "t9")).id == "topic"
    assert ROUTER.route(address("g1", "t1")).id == "group"
    assert ROUTER.route(address("g1")).id == "group"
    assert ROUTER.route(address("other")).id == "account"


def test_unbound_account_or_channel_routes_nowhere():
    assert ROUTER.route(address("g1", account="b")) is None
    assert ROUTER.route(address("g1", channel="webchat")) is None
