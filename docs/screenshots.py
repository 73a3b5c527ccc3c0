"""Screenshots of the teacher console for the docs: ``python docs/screenshots.py`` from the repository root.

It serves a real gateway in this process (its real brain, the model being the tests' stub over HTTP on
loopback, so nothing leaves the machine and no key is needed), gives it sample data through the same
doors a school would use -- a document uploaded in the console, learners writing on the web chat, the
partner answering (one answer cited from the document) -- signs in as the teacher Ada in headless
Chromium and saves one PNG per page at 1280x800 into ``docs/img/console/``, which ``docs/console.md`` and
``docs/zh/console.md`` show.  Run it again whenever a page changes; it overwrites the PNGs.  Two runs
differ only where the data does: the learners' ids (keyed per data dir, a fresh one each run) and the
measured latencies.

It lives beside the pictures it makes, not in ``bench/`` (which measures and states targets), and it
borrows the test rigs (``tests/``): the stub model, the web chat learner, the Chromium launch.
Needs the system Chromium (``apt install chromium``) and Playwright, as the browser tests do.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.app import Gateway  # noqa: E402 - after the path
from gateway.configfile import parse_config  # noqa: E402
from gateway.store.console import Role  # noqa: E402
from tests.browser import TIMEOUT_MS, chromium, signed_in_tab  # noqa: E402
from tests.console.rig import ADA_ID, BEN_ID, PASSWORDS, csrf_of, signed_in, user  # noqa: E402
from tests.console.test_knowledge import WORKSHEET  # noqa: E402
from tests.e2e.rig import PARTNER, STUB_KEY_ENV, WebLearner, e2e_config, served  # noqa: E402
from tests.peers.model_stub import ModelStub, Reply  # noqa: E402
from tests.waits import HANG_S  # noqa: E402

OUT = ROOT / "docs" / "img" / "console"
VIEWPORT = {"width": 1280, "height": 800}
USAGE = {"prompt_tokens": 420, "completion_tokens": 60}

CHATS: list[tuple[str, str, str, list[Reply]]] = [
    # (learner, web chat account, what they say, what the model does for it)
    ("mei", "default", "What does the numerator count?",
     [Reply.tool_calls(("knowledge_search", {"query": "numerator"})), Reply.text("It counts the parts you take [1].", usage=USAGE)]),
    ("mei", "default", "And the denominator?", [Reply.text("How many equal parts make the whole: a third is 1 of 3.", usage=USAGE)]),
    ("tom", "default", "Can you help me with 3/4 + 1/8?", [Reply.text("Sure: 3/4 is 6/8, so 6/8 + 1/8 = 7/8.", usage=USAGE)]),
    ("lin", "algebra", "How do I solve 2x + 3 = 11?", [Reply.text("Take 3 from both sides: 2x = 8, so x = 4.", usage=USAGE)]),
]
"""The sample conversations, in order (the stub takes the scripted replies in turn)."""


def sample_config(data_dir: Path, api_base: str) -> dict[str, Any]:
    """Ada's Study Buddy (the end-to-end rig's partner) and Algebra tutor on two web chat accounts; Ben's Biology."""
    raw = e2e_config(data_dir, api_base)
    buddy = raw["partners"][0]
    buddy["owners"] = [{"channel": "telegram", "user": ADA_ID.split(":", 1)[1]}]
    buddy["model"] |= {"input_cost_per_token": 0.000002, "output_cost_per_token": 0.000008}
    raw["partners"] += [
        {"id": "algebra", "name": "Algebra tutor", "owners": buddy["owners"], "model": buddy["model"]},
        {"id": "biology", "name": "Biology", "model": buddy["model"],
         "owners": [{"channel": "matrix", "user": BEN_ID.split(":", 1)[1]}]},
    ]
    raw["bindings"].append({"partner": "algebra", "channel": "webchat", "account": "algebra"})
    raw["channels"]["webchat"]["algebra"] = {"access": {"dm": "open"}}
    return raw


async def fill(url: str, stub: ModelStub) -> None:
    """The sample data, through the console's and the web chat's own HTTP: the document, then the chats."""
    async with aclosing(await signed_in(url, "ada")) as ada:
        sent = await ada.post(f"/console/partners/{PARTNER}/knowledge", data={"csrf": await csrf_of(ada)},
                              files={"file": ("Fractions Worksheet.md", WORKSHEET, "text/markdown")})
        assert sent.status_code == 303, sent.text
    learners: dict[str, WebLearner] = {}
    try:
        for name, account, question, replies in CHATS:
            stub.script(*replies)
            if name not in learners:
                learners[name] = await WebLearner(url, account=account).open()
            learner = learners[name]
            asked = len(learner.finished())
            await learner.say(question)
            await learner.wait_for(lambda page, asked=asked: len(page.finished()) > asked, what=f"the answer to {question!r}")
    finally:
        for learner in learners.values():
            await learner.close()
    async with aclosing(await signed_in(url, "ada")) as ada, asyncio.timeout(HANG_S):
        while True:  # the dashboard's sums are flushed (latency last) and the ledger has the turns
            day = (await ada.get("/console/api/dashboard")).json()
            if day["totals"]["messages_in"] >= len(CHATS) and day["totals"]["latency_p50_s"] is not None and day["models"]:
                return
            await asyncio.sleep(0.1)


async def shoot(url: str, out: Path, locale: str) -> list[Path]:
    """Sign in as Ada and save a PNG of each page; the transcript is the oldest conversation (the first learner's)."""
    saved = []
    async with chromium() as browser:
        tab = await signed_in_tab(browser, url, "ada", PASSWORDS["ada"], locale=locale, viewport=VIEWPORT)
        page = tab.page

        async def save(name: str, path: str | None = None) -> None:
            if path is not None:
                await page.goto(url + path, timeout=TIMEOUT_MS)
            await page.wait_for_load_state("networkidle", timeout=TIMEOUT_MS)
            target = out / f"{name}.png"
            await page.screenshot(path=str(target))
            saved.append(target)

        await save("partners", "/console/")
        await save("conversations", "/console/conversations")
        await page.locator("#conversations tbody tr a").last.click()  # the oldest: the first learner's, cited
        await page.wait_for_url("**/console/conversations/*", timeout=TIMEOUT_MS)
        await save("transcript")
        await save("learners", f"/console/partners/{PARTNER}/learners")
        await save("knowledge", f"/console/partners/{PARTNER}/knowledge?q=numerator")
        await save("channels", "/console/channels")
        await save("dashboard", "/console/dashboard")
        assert tab.errors == [], tab.errors
        await tab.close()
    return saved


async def main(out: Path, locale: str) -> None:
    os.environ[STUB_KEY_ENV] = "sk-screenshots-otter-6120"  # the stub checks none; the config names one
    os.environ.pop("PARTNERS_RESPONDER", None)  # the gateway builds its real brain
    with tempfile.TemporaryDirectory(prefix="partners-screenshots-") as folder:
        async with ModelStub() as stub:
            config = parse_config(sample_config(Path(folder) / "data", stub.api_base))
            async with Gateway(config) as gateway, served(gateway) as url:
                for made in (user("ada", Role.TEACHER, ADA_ID), user("ben", Role.TEACHER, BEN_ID)):
                    assert await gateway.store.add_console_user(made)
                began = time.monotonic()
                await fill(url, stub)
                for path in await shoot(url, out, locale):
                    print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}  {path.stat().st_size // 1024} KB")
                print(f"done in {time.monotonic() - began:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the PNGs go (default {OUT.relative_to(ROOT)})")
    parser.add_argument("--locale", default="en-US", help="the browser's language (zh-CN: the console in Chinese)")
    arguments = parser.parse_args()
    arguments.out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(arguments.out, arguments.locale))
