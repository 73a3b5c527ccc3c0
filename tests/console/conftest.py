"""The console tests' fixtures: a headless Chromium for a browser test (:mod:`tests.browser`), the real brain
and the stub model server it reaches."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

from tests.browser import chromium

if TYPE_CHECKING:
    from playwright.async_api import Browser


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


@pytest.fixture
def real_brain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway builds its real brain, its model the stub (see :mod:`tests.console.brain_rig`)."""
    from tests.console.brain_rig import STUB_KEY
    from tests.e2e.rig import STUB_KEY_ENV

    monkeypatch.setenv(STUB_KEY_ENV, STUB_KEY)
    monkeypatch.delenv("PARTNERS_RESPONDER", raising=False)  # the gateway must build its real brain


@pytest.fixture
async def stub():
    """The OpenAI-compatible stub model server on loopback, which litellm reaches over HTTP."""
    from tests.peers.model_stub import ModelStub

    async with ModelStub() as running:
        yield running
