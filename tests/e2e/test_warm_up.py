"""A fresh ``partners serve`` imports the model library once it listens, so the first answer does not wait for it.

Real processes: ``partners serve`` (its partner's model on the stub model
process, reached by litellm over HTTP) and a learner on the web chat's HTTP
API.  What the gateway did is read from its own log (INFO, stderr): litellm
logs one "model library loaded" line when it is imported, and a warm-up that
failed says so.  How soon the first answer comes is measured in
``bench/startup.py``, not here.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import httpx
import pytest
import yaml

from tests.crash.gateway_process import GatewayProcess
from tests.e2e.rig import STUB_KEY_ENV, WebLearner, e2e_config
from tests.peers.model_stub import ModelStubProcess

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
LOADED = "model library loaded"
LIVENESS_S = 120.0
"""Only bounds a hang: importing litellm is seconds of CPU, more on a loaded machine."""


@pytest.fixture
def stub():
    running = ModelStubProcess.start()
    try:
        yield running
    finally:
        running.stop()


def gateway_for(tmp_path: Path, stub: ModelStubProcess, *, shadow: Path | None = None) -> GatewayProcess:
    """``partners serve`` on web chat with the partner's model on the stub; ``shadow`` goes first on the path."""
    config = tmp_path / "partners.yaml"
    config.write_text(yaml.safe_dump(e2e_config(tmp_path / "data", stub.api_base)))
    # Without the offline switches: the gateway must set them itself before litellm imports.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PARTNERS_RESPONDER", "LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_OFFLINE_MODE")}
    env["PYTHONPATH"] = os.pathsep.join([*([str(shadow)] if shadow else []), str(ROOT)])
    env[STUB_KEY_ENV] = "sk-e2e"
    return GatewayProcess(tmp_path, config, env)


def log_of(tmp_path: Path) -> str:
    return (tmp_path / "gateway-1.log").read_text(errors="replace")


async def logged(tmp_path: Path, pattern: str) -> str:
    """Wait until the gateway's log has a line matching ``pattern``; that line."""
    async def find() -> str | None:
        while not (match := re.search(rf"^.*{pattern}.*$", log_of(tmp_path), re.MULTILINE)):
            await asyncio.sleep(0.05)
        return match.group(0)

    try:
        return await asyncio.wait_for(find(), LIVENESS_S)
    except TimeoutError:
        raise AssertionError(f"no {pattern!r} in the gateway's log:\n{log_of(tmp_path)[-3000:]}") from None


async def test_serve_imports_the_model_library_once_it_listens_before_any_turn_and_fetches_nothing(tmp_path, stub):
    gateway = gateway_for(tmp_path, stub)
    await gateway.start()
    try:
        line = await logged(tmp_path, LOADED)
        assert stub.requests() == []  # no learner spoke: the import came from serve itself
    finally:
        await gateway.stop()
    assert gateway.process is not None and gateway.process.returncode == 0
    text = log_of(tmp_path)
    assert text.count(LOADED) == 1, text
    assert "model cost map" not in text and "raw.githubusercontent" not in text, text  # no fetch at import
    assert line.index(LOADED) > 0


async def test_a_first_question_during_the_warm_up_is_answered_and_litellm_imports_once(tmp_path, stub):
    gateway = gateway_for(tmp_path, stub)
    await gateway.start()
    try:
        learner = await WebLearner(gateway.url).open()  # at once: the import takes seconds, so it is still going
        try:
            await learner.say("What is photosynthesis?")
            await learner.wait_for(lambda page: [s for s in page.finished() if s.text == "echo: What is photosynthesis?"],
                                   timeout=LIVENESS_S, what="the model's answer")
        finally:
            await learner.close()
    finally:
        await gateway.stop()
    assert log_of(tmp_path).count(LOADED) == 1, log_of(tmp_path)
    assert len(stub.requests()) == 1


async def test_a_failed_warm_up_is_logged_and_the_gateway_keeps_serving(tmp_path, stub):
    shadow = tmp_path / "shadow" / "litellm"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("this litellm is broken on purpose")\n')
    gateway = gateway_for(tmp_path, stub, shadow=shadow.parent)
    await gateway.start()
    try:
        line = await logged(tmp_path, "model library warm-up failed")
        assert "this litellm is broken on purpose" in line
        async with httpx.AsyncClient(trust_env=False) as http:
            assert (await http.get(f"{gateway.url}/healthz", timeout=LIVENESS_S)).status_code == 200
        assert gateway.process is not None and gateway.process.returncode is None
    finally:
        await gateway.stop()
    assert gateway.process.returncode == 0
    assert "Traceback" not in log_of(tmp_path)
