"""Who a web chat sender is: nobody there is the teacher, and the session credential stays a secret.

The web chat's session id is made up by the browser, so it proves nothing about a
person: a partner's owner may not be named on such a channel (the config refuses it),
and the access path never gives the owner role to a sender on a channel that does
not authenticate its senders (the second lock, for a config that slipped past).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from gateway.app import Gateway
from gateway.config import parse_config
from gateway.errors import ConfigError
from tests.pipeline.conftest import ScriptedResponder, make_config
from tests.pipeline.memory_channel import DEFAULT_CAPS, MemoryChannel, Sent

TEACHER = {"owners": [{"channel": "memory", "user": "teacher", "account": "acct"}]}


class UnsignedChannel(MemoryChannel):
    """The memory channel, declared as one whose senders are only claims (as web chat's are)."""

    caps = DEFAULT_CAPS.model_copy(update={"authenticates_senders": False})


Start = Callable[[type[MemoryChannel]], Awaitable[tuple[Gateway, MemoryChannel]]]


@pytest.fixture
async def start(tmp_path) -> AsyncIterator[Start]:
    running: list[Gateway] = []

    async def start(channel_class: type[MemoryChannel]) -> tuple[Gateway, MemoryChannel]:
        gateway = Gateway(make_config(tmp_path, partner=TEACHER), responder=ScriptedResponder(),
                          channel_classes={"memory": channel_class})
        await gateway.start()
        running.append(gateway)
        channel = gateway.channel("memory", "acct")
        assert isinstance(channel, MemoryChannel)
        return gateway, channel

    yield start
    for gateway in running:
        await gateway.stop()


def to_teacher(sent: list[Sent]) -> list[str]:
    return [s.text for s in sent if s.chat == "teacher" and s.final]


def test_web_chat_and_email_do_not_authenticate_their_senders_and_telegram_does():
    from gateway.capabilities import authenticates_senders

    assert not authenticates_senders("webchat")
    assert not authenticates_senders("email")
    assert authenticates_senders("telegram")
    assert authenticates_senders("matrix")
    assert not authenticates_senders("no-such-platform")


def test_the_config_refuses_an_owner_on_the_web_chat(tmp_path):
    raw = {"data_dir": str(tmp_path),
           "partners": [{"id": "tutor", "name": "Tutor", "owners": [{"channel": "webchat", "user": "abc"}]}]}
    with pytest.raises(ConfigError) as refused:
        parse_config(raw, source="partners.yaml")
    text = str(refused.value)
    assert "partners.0.owners.0.channel" in text
    assert "webchat does not prove who its senders are" in text


async def test_an_owner_listed_on_an_unauthenticated_channel_is_only_a_learner(start):
    """The config check is bypassed here (a plugged-in channel has no catalog row): the access path still refuses."""
    _, channel = await start(UnsignedChannel)
    await channel.inject("/takeovers", chat="teacher", user="teacher")
    await channel.wait_for(lambda sent: len(to_teacher(sent)) >= 1)
    assert to_teacher(channel.sent) == ["re: /takeovers"]  # answered by the model as a learner's words


async def test_the_same_owner_on_an_authenticated_channel_is_the_teacher(start):
    _, channel = await start(MemoryChannel)
    await channel.inject("/takeovers", chat="teacher", user="teacher")
    await channel.wait_for(lambda sent: len(to_teacher(sent)) >= 1)
    assert to_teacher(channel.sent) == ["No conversations are waiting for you."]
