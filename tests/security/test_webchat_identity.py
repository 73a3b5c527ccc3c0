"""Who a web chat sender is: nobody there is the teacher, and the session credential stays a secret.

The session lives in an HttpOnly cookie; logs, the database, memory and the
pipeline know only the learner id derived from it with the data dir's key.

The web chat's session id is made up by the browser, so it proves nothing about a
person: a partner's owner may not be named on such a channel (the config refuses it),
and the access path never gives the owner role to a sender on a channel that does
not authenticate its senders (the second lock, for a config that slipped past).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.config import Config
from gateway.core.errors import ConfigError
from tests.e2e.rig import WebLearner, served
from tests.pipeline.conftest import ScriptedResponder, make_config
from tests.pipeline.memory_channel import DEFAULT_CAPS, MemoryChannel, Sent
from tests.waits import HTTP_S

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
    from gateway.core.capabilities import authenticates_senders

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


# --------------------------------------------------------------------------- the session credential


def web_config(data_dir: Path) -> Config:
    return parse_config({
        "data_dir": str(data_dir),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "webchat", "account": "default"}],
        "channels": {"webchat": {"default": {"access": {"dm": "open"}}}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
    })


def answers(learner: WebLearner) -> list[str]:
    return [shown.text for shown in learner.finished()]


async def test_the_session_is_never_logged_or_stored_only_its_learner_id(tmp_path, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    data = tmp_path / "data"
    async with Gateway(web_config(data), responder=ScriptedResponder()) as gateway, served(gateway) as url:
        learner = await WebLearner(url).open()
        try:
            await learner.say("what is 7 x 8?")
            await learner.wait_for(lambda page: answers(page) == ["re: what is 7 x 8?"])
        finally:
            await learner.close()
    session = learner.session
    assert learner.learner.startswith("w") and session not in learner.learner
    assert f"learner={learner.learner}" in caplog.text  # the INFO lines name the learner id ...
    assert session not in caplog.text  # ... and no line at any level names the credential
    for path in data.rglob("*"):
        if path.is_file():
            assert session.encode() not in path.read_bytes(), f"the session is stored in {path.name}"


async def test_the_learner_id_is_stable_for_a_session_and_keyed_per_data_dir(tmp_path) -> None:
    session = "the-same-session-in-two-gateways-000"
    ids = []
    for data in (tmp_path / "a", tmp_path / "a", tmp_path / "b"):
        async with Gateway(web_config(data), responder=ScriptedResponder()) as gateway, served(gateway) as url:
            learner = await WebLearner(url, session=session).open()
            await learner.close()
            ids.append(learner.learner)
    assert ids[0] == ids[1]  # the same learner across a restart: memory and backlog stay theirs
    assert ids[2] != ids[0]  # without this data dir's key the id cannot be computed from the session


async def test_the_event_stream_takes_the_session_from_the_cookie_not_the_url(tmp_path) -> None:
    async with Gateway(web_config(tmp_path / "data"), responder=ScriptedResponder()) as gateway, served(gateway) as url:
        learner = await WebLearner(url).open()
        try:
            async with httpx.AsyncClient(base_url=f"{url}/channels/webchat/default", trust_env=False, timeout=HTTP_S) as other:
                stolen = await other.get("/api/events", params={"session": learner.session})
                posted = await other.post("/api/messages", json={"session": learner.session, "message_id": "x", "text": "hi"})
        finally:
            await learner.close()
    assert stolen.status_code == 401 and posted.status_code == 401


async def test_a_second_session_reusing_a_message_id_is_answered_too(tmp_path) -> None:
    """Message ids are the page's choice, so dedup is per session: another session's "m1" is a new message."""
    async with Gateway(web_config(tmp_path / "data"), responder=ScriptedResponder()) as gateway, served(gateway) as url:
        ann, bob = await WebLearner(url).open(), await WebLearner(url).open()
        try:
            for learner, text in ((ann, "hello from ann"), (bob, "hello from bob")):
                response = await learner.http.post("/api/messages", json={"message_id": "m1", "text": text})
                assert response.status_code == 202
            await ann.wait_for(lambda page: answers(page) == ["re: hello from ann"])
            await bob.wait_for(lambda page: answers(page) == ["re: hello from bob"])
        finally:
            await ann.close()
            await bob.close()
