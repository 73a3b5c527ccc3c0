"""Made-up web chat identities cannot lock new learners out of pairing.

A web chat session costs nothing, so a visitor can open three and use up an
account's ``pairing_max_pending`` -- for an hour nobody else would get a code.
Web chat messages carry their *source* (a keyed hash of the client address),
and pending codes are bounded per source: the flood uses up its own codes only.
Clients at 127.0.0.1 and 127.0.0.2 are two sources over a real socket.
"""

from __future__ import annotations

from pathlib import Path

from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.config import Config
from tests.e2e.rig import WebLearner, served
from tests.pipeline.conftest import ScriptedResponder


def pairing_config(data_dir: Path) -> Config:
    return parse_config({
        "data_dir": str(data_dir),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "webchat", "account": "default"}],
        "channels": {"webchat": {"default": {"access": {"dm": "pairing", "pairing_max_pending": 3}}}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
    })


def told_a_code(learner: WebLearner) -> bool:
    return any("Your code is" in shown.text for shown in learner.finished())


async def test_three_identities_from_one_address_do_not_lock_out_a_learner_elsewhere(tmp_path: Path) -> None:
    async with Gateway(pairing_config(tmp_path / "data"), responder=ScriptedResponder()) as gateway, \
            served(gateway) as url:
        flood = [await WebLearner(url).open() for _ in range(4)]
        newcomer = await WebLearner(url, local_address="127.0.0.2").open()
        try:
            for learner in flood[:3]:
                await learner.say("let me in")
                await learner.wait_for(told_a_code, what="a pairing code")
            await flood[3].say("and me")  # the same address again: its codes are used up
            await newcomer.say("hello, I am in Year 9")
            await newcomer.wait_for(told_a_code, what="the newcomer's pairing code")
            pending = await gateway.store.pairing_list()
        finally:
            for learner in [*flood, newcomer]:
                await learner.close()
    assert sorted(request.user for request in pending) == sorted(
        [learner.learner for learner in flood[:3]] + [newcomer.learner])
    assert not told_a_code(flood[3])
