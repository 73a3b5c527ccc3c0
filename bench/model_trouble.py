"""How long a learner waits for an answer when the partner's model is down or stuck, with the default deadlines.

A real ``Gateway`` (its own brain, litellm, the web chat channel and HTTP app)
and a learner on the web chat page, as in ``tests/e2e/test_model_trouble.py``,
but with the *default* deadlines of ``ModelSettings`` (connect 5 s, first
token 15 s, whole answer 120 s).  For each case the time from posting the
question to the final answer (the notes, with the trouble sentence) is
printed, with the attempts the stub saw.

Cases: the model's port is closed (down), with no backup and with a closed
backup; the model accepts and never answers (stuck), with no backup and with a
stuck backup; and a healthy model, for scale.

Usage: python bench/model_trouble.py [--cases down,down+down,stuck,stuck+stuck,healthy] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from gateway.app import Gateway  # noqa: E402
from gateway.configfile import parse_config  # noqa: E402
from tests.e2e.rig import STUB_KEY_ENV, WebLearner, e2e_config, served  # noqa: E402
from tests.peers.model_stub import ModelStub, Reply  # noqa: E402

TROUBLE = "having trouble reaching my thinking engine"
CASES = ("down", "down+down", "stuck", "stuck+stuck", "healthy")


def closed_base() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/v1"


async def one(case: str, folder: Path) -> tuple[float, int, str]:
    primary, _, backup = case.partition("+")
    async with ModelStub() as stub:
        bases = {"down": closed_base(), "stuck": stub.api_base, "healthy": stub.api_base}
        if primary == "stuck":
            stub.script(*[Reply.hung()] * 4)
        raw = e2e_config(folder, bases[primary])
        model = raw["partners"][0]["model"]
        model.pop("timeout_s", None)  # the defaults, all three
        if backup:
            model["backup"] = {**model, "model": "openai/backup-model", "api_base": bases[backup]}
        gateway = Gateway(parse_config(raw))
        await gateway.start()
        try:
            async with served(gateway) as url:
                learner = await WebLearner(url).open()
                try:
                    began = time.perf_counter()
                    await learner.say("What is photosynthesis?")
                    bubble = await learner.wait_for(lambda page: next(iter(page.finished()), None), timeout=600)
                    return bubble.at - began, len(stub.requests), "notes" if TROUBLE in bubble.text else "model"
                finally:
                    await learner.close()
        finally:
            await gateway.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--dir", type=Path, default=None)
    options = parser.parse_args()
    os.environ.setdefault(STUB_KEY_ENV, "sk-bench")
    os.environ.pop("PARTNERS_RESPONDER", None)
    print(f"{'case':<14}{'answer after':>14}{'stub saw':>10}  answered by")
    with tempfile.TemporaryDirectory(dir=options.dir) as tmp:
        for number, case in enumerate(options.cases.split(",")):
            seconds, asked, by = await one(case, Path(tmp) / str(number))
            print(f"{case:<14}{seconds:>12.2f} s{asked:>10}  {by}", flush=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
