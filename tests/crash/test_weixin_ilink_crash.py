"""Every message answered, across SIGKILLs, on personal WeChat (iLink) -- and at most one repeat per kill.

The iLink emulator (its own process, never killed) plays 10 learners that say
120 numbered messages.  The account is logged in by QR code first, into the
data dir's store, as the teacher does it.  Meanwhile a real ``partners serve``
process on the ``weixin`` channel (``kind: ilink``) is killed with SIGKILL four
times and started again.  The poll cursor is stored only after a batch is
durable, so a kill between the two makes the emulator serve the batch again,
and the dedup key (the platform's ``message_id``) answers it once.

The platform hands back no message id and is not known to deduplicate by
``client_id``, so a reply it took whose answer never reached the gateway's
record may go again after a restart; ADR 0022 bounds that to one send per
account at a time.  The checks, from the emulator's record:

- nothing missing: every message is answered;
- nothing misplaced: every answer went to the learner who asked;
- answers beyond one per message number at most one per SIGKILL;
- the emulator refused nothing: every reply carried a good context token,
  within the budget.

Set ``CRASH_SEED`` to replay a run; the seed is printed.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest
import yaml

from tests.crash.gateway_process import GatewayProcess
from tests.crash.scenario import ROOT, crash_seed, gateway_env, kill_and_restart, wait_until
from tests.peers import stop_process
from tests.waits import HANG_S

MESSAGES, LEARNERS, KILLS = 120, 10, 4
REPEATS_PER_KILL = 1
TOKEN_RE = re.compile(r"msg-\d{4}")

pytestmark = pytest.mark.slow


def start_peer(log: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with open(log, "ab") as errors:
        process = subprocess.Popen([sys.executable, "-m", "tests.peers.weixin_ilink_server", "--port", "0"],
                                   cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=errors)
    line = process.stdout.readline().decode()  # type: ignore[union-attr]
    if "listening on " not in line:
        process.kill()
        raise RuntimeError(f"the iLink emulator did not start (see {log}): {line!r}")
    return process, line.split("listening on ", 1)[1].strip()


def write_config(workdir: Path, base: str) -> tuple[Path, dict]:
    account = {"base_url": base, "poll_timeout_s": 1, "access": {"dm": "open"}}
    config = {
        "data_dir": str(workdir / "data"),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "weixin", "account": "school"}],
        "channels": {"weixin": {"school": account}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1, "delivery_max_attempts": 50},
    }
    path = workdir / "partners.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, account


async def log_in(workdir: Path, account: dict) -> None:
    from channels.weixin.config import IlinkConfig
    from channels.weixin.ilink.login import login
    from gateway.app import AccountCursors
    from gateway.store.sqlite import SqliteStore

    (workdir / "data").mkdir(parents=True, exist_ok=True)
    store = SqliteStore(workdir / "data" / "gateway.db")
    await store.open()
    try:
        await asyncio.wait_for(login(IlinkConfig.model_validate(account), AccountCursors(store, "weixin", "school"),
                                     account="school", show=lambda link: None, said=lambda state: None), HANG_S)
    finally:
        await store.close()


async def say_all(http: httpx.AsyncClient, rng: random.Random) -> dict[str, str]:
    """Say MESSAGES numbered messages, ~25 per second; return token -> learner."""
    asked: dict[str, str] = {}
    for n in range(MESSAGES):
        learner, token = f"learner-{rng.randrange(LEARNERS)}@im.wechat", f"msg-{n:04d}"
        (await http.post("_test/say", json={"learner": learner, "text": token})).raise_for_status()
        asked[token] = learner
        await asyncio.sleep(rng.uniform(0, 0.08))
    return asked


async def test_every_message_is_answered_and_a_sigkill_repeats_at_most_one_send(tmp_path):
    seed = crash_seed()
    rng = random.Random(seed)
    process, base = start_peer(tmp_path / "ilink-api.log")
    config, account = write_config(tmp_path, base)
    gateway = GatewayProcess(tmp_path, config, gateway_env(delta_delay=0.01))
    http = httpx.AsyncClient(base_url=base, timeout=HANG_S, trust_env=False)
    try:
        await log_in(tmp_path, account)
        await gateway.start()
        asked, ready = await asyncio.gather(say_all(http, rng), kill_and_restart(gateway, rng, kills=KILLS, between=(1.0, 2.0)))

        async def sent() -> list[dict]:
            return (await http.get("_test/sent")).json()

        async def all_answered() -> bool:
            shown = {t for s in await sent() for t in TOKEN_RE.findall(s["text"])}
            return len(shown) >= len(asked) and await gateway.backlog() == 0

        await wait_until(all_answered, within=2 * HANG_S, what="not every message was answered", poll=0.25)
        await gateway.stop()
        replies, refused = await sent(), (await http.get("_test/refused")).json()
    finally:
        await gateway.stop()
        await http.aclose()
        stop_process(process)

    answered: Counter[str] = Counter()
    misplaced = []
    for reply in replies:
        for token in set(TOKEN_RE.findall(reply["text"])):
            answered[token] += 1
            if asked[token] != reply["to"]:
                misplaced.append(f"{token} asked by {asked[token]}, answered to {reply['to']}")
    extra = sum(n - 1 for n in answered.values())
    print(f"weixin ilink crash test (seed {seed}): {len(asked)} messages, {len(replies)} replies, "
          f"{gateway.starts - 1} SIGKILLs, ready after restart {min(ready):.2f}-{max(ready):.2f} s; "
          f"extra replies {extra} (allowed {KILLS * REPEATS_PER_KILL})")
    assert gateway.starts - 1 == KILLS
    assert not sorted(set(asked) - set(answered)), "messages never answered"
    assert not misplaced, misplaced[:5]
    assert extra <= KILLS * REPEATS_PER_KILL, f"{extra} replies beyond one per message"
    assert refused == [], refused[:5]
