"""A model that is down or hangs: the learner gets the notes quickly, the teacher is told, and it recovers.

A real ``Gateway`` with its own brain, served on a real port, a learner on the web
chat page, and the stub model over HTTP.  The deadlines are made short in the
config so the test is quick; waits only bound a hang.  Nothing here times anything
(the cost of the default deadlines is measured in ``bench/model_trouble.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from brain.notes import TROUBLE_NOTICE
from gateway.app import Gateway
from gateway.cli import cli
from gateway.cli.status import STATUS_PROBLEMS_EXIT
from gateway.configfile import parse_config
from tests.e2e.rig import PARTNER, WebLearner, e2e_config, served
from tests.peers.model_stub import ModelStub, Reply

pytestmark = [pytest.mark.timeout(180), pytest.mark.filterwarnings("ignore::DeprecationWarning:litellm.*")]

QUESTION = "What is photosynthesis?"
NOTES_LINE = "Photosynthesis is how plants, algae and some bacteria make their own food."
TROUBLE = TROUBLE_NOTICE.strip("_")
QUICK = {"first_token_timeout_s": 2, "connect_timeout_s": 5, "timeout_s": 30}
"""Short enough for a quick test, long enough that a loaded machine answering from the stub meets them."""
HANG_BOUND = 90.0
"""Seconds a wait may last before the test calls it a hang (the deadlines make it a few seconds)."""


def closed_base() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


@contextlib.asynccontextmanager
async def gateway_on(tmp_path: Path, primary_base: str, backup_base: str) -> AsyncIterator[tuple[Gateway, str, WebLearner]]:
    raw = e2e_config(tmp_path / "data", primary_base)
    model = raw["partners"][0]["model"]
    model.update(QUICK, backup={**model, **QUICK, "model": "openai/backup-model", "api_base": backup_base})
    gateway = Gateway(parse_config(raw))
    await gateway.start()
    try:
        async with served(gateway) as url:
            learner = await WebLearner(url).open()
            try:
                yield gateway, url, learner
            finally:
                await learner.close()
    finally:
        await gateway.stop()


def answer_with(text: str):
    def check(learner: WebLearner):
        return next((b for b in learner.finished() if text in b.text), None)
    return check


async def status_of(url: str) -> dict:
    async with httpx.AsyncClient(trust_env=False) as http:
        response = await http.get(f"{url}/status", timeout=30)
    assert response.status_code == 200
    return next(m for m in response.json()["models"] if m["partner"] == PARTNER)


async def metric(url: str, kind: str) -> float:
    async with httpx.AsyncClient(trust_env=False) as http:
        text = (await http.get(f"{url}/metrics", timeout=30)).text
    line = f'partners_model_errors_total{{kind="{kind}",partner="{PARTNER}"}} '
    return next((float(row[len(line):]) for row in text.splitlines() if row.startswith(line)), 0.0)


async def partners_status(url: str):
    return await asyncio.to_thread(CliRunner().invoke, cli, ["status", "--url", url], prog_name="partners")


async def test_a_hanging_model_and_backup_give_the_notes_the_teacher_sees_it_and_it_recovers(tmp_path):
    async with ModelStub() as stub, gateway_on(tmp_path, stub.api_base, stub.api_base) as (gateway, url, learner):
        stub.script(*[Reply.hung()] * 4)
        await learner.say(QUESTION)
        bubble = await learner.wait_for(answer_with(TROUBLE), timeout=HANG_BOUND, what="the notes answer")
        assert NOTES_LINE in bubble.text and "For my teacher" not in bubble.text
        assert [r["model"] for r in stub.requests] == ["stub-model", "stub-model", "backup-model", "backup-model"]
        assert learner.typing and all(at <= bubble.at for at in learner.typing), "typing went on after the answer"

        failing = await status_of(url)
        assert failing["state"] == "failing" and failing["kind"] == "timeout" and failing["since"]
        assert failing["model"] == "openai/stub-model" and failing["backup"] == "openai/backup-model"
        assert "first_token_timeout_s" in failing["reason"] and failing["failures"] == 4
        assert await metric(url, "timeout") == 4
        told = await partners_status(url)
        assert told.exit_code == STATUS_PROBLEMS_EXIT, told.output
        assert f"partner {PARTNER}'s model openai/stub-model is failing" in told.stderr
        assert "failing" in told.stdout and "timeout: " in told.stdout

        stub.state.responder = lambda body: Reply.text("Plants turn light into sugar.")  # whichever try it is
        await learner.say("And again?")
        await learner.wait_for(answer_with("Plants turn light into sugar."), timeout=HANG_BOUND, what="the model's answer")
        recovered = await status_of(url)
        assert recovered["state"] == "ok" and recovered["reason"] == "" and recovered["failures"] == 0
        assert (await partners_status(url)).exit_code == 0
        assert await metric(url, "timeout") >= 4  # a counter: the failures stay counted


async def test_a_model_that_is_down_and_a_backup_that_hangs(tmp_path):
    async with ModelStub() as stub, gateway_on(tmp_path, closed_base(), stub.api_base) as (gateway, url, learner):
        stub.script(Reply.hung(), Reply.hung())
        await learner.say(QUESTION)
        bubble = await learner.wait_for(answer_with(TROUBLE), timeout=HANG_BOUND, what="the notes answer")
        assert NOTES_LINE in bubble.text
        assert [r["model"] for r in stub.requests] == ["backup-model", "backup-model"]
        assert await metric(url, "unreachable") == 2 and await metric(url, "timeout") == 2
        failing = await status_of(url)
        assert failing["state"] == "failing" and failing["kind"] == "timeout"


async def test_a_backup_that_answers_leaves_the_partner_degraded_until_its_own_model_does(tmp_path):
    async with ModelStub() as stub, gateway_on(tmp_path, closed_base(), stub.api_base) as (gateway, url, learner):
        stub.state.responder = lambda body: Reply.text("The backup says plants eat light.")
        await learner.say(QUESTION)
        await learner.wait_for(answer_with("The backup says plants eat light."), timeout=HANG_BOUND, what="the backup's answer")
        degraded = await status_of(url)
        assert degraded["state"] == "degraded" and degraded["kind"] == "unreachable"
        assert "connection refused" in degraded["reason"] and "backup openai/backup-model answers" in degraded["reason"]
        assert (await partners_status(url)).exit_code == STATUS_PROBLEMS_EXIT


async def test_an_answer_that_stalls_keeps_its_beginning_on_the_page(tmp_path):
    async with ModelStub() as stub, gateway_on(tmp_path, stub.api_base, stub.api_base) as (gateway, url, learner):
        stub.script(Reply.stalled("Plants make sugar from light, and", chunk=18, after=2))
        await learner.say(QUESTION)
        bubble = await learner.wait_for(answer_with("lost my connection"), timeout=HANG_BOUND, what="the cut answer")
        assert bubble.text.startswith("Plants make sugar")
        versions = learner.bubbles()[bubble.id]
        assert all(v.text.startswith("Plants make sugar") for v in versions if v.text), versions
        assert len(learner.bubbles()) == 1 and len(stub.requests) == 1
