"""Fixtures for full turns: the stub model, and a real Gateway on web chat or on the relay channel."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.e2e.rig import STUB_KEY_ENV, WebLearner, accepting, e2e_config, served
from tests.peers.model_stub import ModelStub
from tests.peers.relay_platform import RelayClient


@pytest.fixture(autouse=True)
def _model_env(monkeypatch):
    monkeypatch.setenv(STUB_KEY_ENV, "sk-e2e")
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain


@pytest.fixture
async def stub(request) -> AsyncIterator[ModelStub]:
    """The stub model on this test's loop; parametrize indirectly with the parameters it refuses (``("tools",)``)."""
    async with ModelStub(rejects=getattr(request, "param", ())) as running:
        yield running


@dataclass
class WebRig:
    gateway: Gateway
    learner: WebLearner
    stub: ModelStub
    config: Config


@pytest.fixture
async def open_web(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[WebRig]]]:
    """Start a gateway on web chat against a given stub, serve it, open a learner's page.

    Takes the stub and ``e2e_config`` options (``mid_turn="merge"``); everything stops in reverse order.
    """
    async with contextlib.AsyncExitStack() as stack:

        async def open_(stub: ModelStub, **options) -> WebRig:
            config = parse_config(e2e_config(tmp_path / "data", stub.api_base, **options))
            gateway = Gateway(config)
            await gateway.start()
            stack.push_async_callback(gateway.stop)
            url = await stack.enter_async_context(served(gateway))
            learner = await WebLearner(url).open()
            stack.push_async_callback(learner.close)
            return WebRig(gateway, learner, stub, config)

        yield open_


@pytest.fixture
async def web(open_web, stub) -> WebRig:
    return await open_web(stub)


@dataclass
class RelayRig:
    gateway: Gateway
    client: RelayClient
    stub: ModelStub


@pytest.fixture
async def relay(relay_peer, stub, tmp_path, monkeypatch) -> AsyncIterator[RelayRig]:
    """A gateway whose only channel is the relay plugin (found through its entry point), on its own bot."""
    token = f"tok-{uuid.uuid4().hex}"
    variable = f"RELAY_TOKEN_{uuid.uuid4().hex[:8].upper()}"
    monkeypatch.setenv(variable, token)
    await accepting(relay_peer.url)
    client = RelayClient(relay_peer.url, token)
    await client.register()
    settings = {"base_url": relay_peer.url, "token": f"env:{variable}", "poll_timeout": 2}
    config = parse_config(e2e_config(tmp_path / "data", stub.api_base, channel="relay", account="main",
                                     account_settings=settings))
    gateway = Gateway(config)
    await gateway.start()
    try:
        assert gateway.channel("relay", "main") is not None, gateway.unavailable
        yield RelayRig(gateway, client, stub)
    finally:
        await gateway.stop()
        await client.aclose()

