"""The ``store`` fixture: one fresh store per test, on every engine in :data:`tests.store.engines.ENGINES`."""

from __future__ import annotations

import pytest

from tests.store.engines import ENGINES, open_store


@pytest.fixture(params=ENGINES)
async def store(request, tmp_path):
    s = await open_store(request.param, tmp_path)
    yield s
    await s.close()
