"""The dashboard's model rows with the gateway's real brain, reaching the stub model over HTTP.

One answered turn (the stub reports its tokens; the partner names its price per token, so the cost
is known) and one that fails (the stub says 401 to the model call): the dashboard shows the tokens
and cost of the first and the model error of the second.
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from pathlib import Path

import pytest

from gateway.store.console import Role
from tests.console.brain_rig import brain_console
from tests.console.rig import signed_in, user
from tests.e2e.rig import PARTNER, WebLearner
from tests.peers.model_stub import ModelStub, Reply
from tests.waits import HANG_S

pytestmark = pytest.mark.usefixtures("real_brain")


async def test_tokens_cost_and_model_errors_reach_the_dashboard(tmp_path: Path):
    async with ModelStub() as stub:
        stub.script(Reply.text("Plants make sugar from light.", usage={"prompt_tokens": 40, "completion_tokens": 10}),
                    *[Reply.unauthorized()] * 4)
        async with brain_console(tmp_path / "data", stub.api_base, user("root", Role.ADMINISTRATOR), owner="telegram:700",
                                 model={"input_cost_per_token": 0.001, "output_cost_per_token": 0.002}) as running:
            url = running.url
            learner = await WebLearner(url).open()
            try:
                await learner.say("what is photosynthesis?")
                await learner.wait_for(lambda page: page.finished(), what="the answer")
                await learner.say("and respiration?")
                await learner.wait_for(lambda page: len(page.finished()) >= 2, what="the second answer (the fallback)")
            finally:
                await learner.close()
            async with aclosing(await signed_in(url, "root")) as root:
                async with asyncio.timeout(HANG_S):
                    while not (day := (await root.get("/console/api/dashboard")).json())["model_errors_by_kind"]:
                        await asyncio.sleep(0.05)
                [use] = day["models"]
                assert (use["partner"], use["tokens"]) == (PARTNER, 50)  # the failed turn spent none
                assert use["cost"] == pytest.approx(40 * 0.001 + 10 * 0.002)
                assert "auth" in day["model_errors_by_kind"], day["model_errors_by_kind"]
                page = (await root.get("/console/dashboard")).text
                assert f'<tr data-partner="{PARTNER}">' in page and 'data-model-error="auth"' in page
