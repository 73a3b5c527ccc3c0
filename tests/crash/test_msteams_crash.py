"""Every activity Teams delivered answered, across SIGKILLs, on a Teams bot's webhook -- at most one repeat per kill.

The Bot Framework emulator runs in the test's process (never killed): ``LEARNERS``
learners say numbered messages in their 1:1 chats, while a real ``partners
serve`` on the ``msteams`` channel is SIGKILLed ``KILLS`` times and started
again on the same data dir -- the last time only after ``DOWN_S``, longer than
the emulator keeps trying.  Each activity is posted signed and posted again
-- three retries, ``retry_after_s`` apart -- while the answer is not 2xx.  The
responder streams slowly (``THINK_S`` a delta), so kills land mid-stream: a
1:1 answer is a Teams stream (typing updates, then the final message).

The Bot Connector takes no idempotency key: a message it showed whose record
the killed gateway had not yet made durable is sent again after the restart
(ADR 0022 bounds that to one send per account).  From the emulator's record:

- what the emulator gave up on is counted, and one that never reached a
  gateway is never answered;
- nothing missing: every acknowledged activity is answered in its chat;
- at most one bot message beyond one per answer for each SIGKILL.

Set ``CRASH_SEED`` to replay a run; the seed is printed.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
from collections import Counter

import pytest

from tests.crash.scenario import (
    CallbackGateway,
    crash_seed,
    gateway_env,
    kill_then_stay_down,
    until_settled,
    write_config,
)
from tests.peers.msteams_server import RETRIES, TeamsPeer
from tests.peers.tencent_api import serving
from tests.waits import HANG_S

LEARNERS, QUICK_KILLS = 6, 2
THINK_S = 0.4
RETRY_S = 3.0
DOWN_S = RETRIES * RETRY_S + 3
SAID_INTO_OUTAGE_S = 2.0
CALM_S = (5.0, 7.0)
KILLS = QUICK_KILLS + 1
TOKEN_RE = re.compile(r"msg-\d{4}")

pytestmark = pytest.mark.slow


async def say_all(peer: TeamsPeer, rng: random.Random, stop: asyncio.Event) -> dict[str, tuple[str, str]]:
    """Say numbered messages until ``stop``, each retried on its own; activity id -> (chat, token)."""
    asked: dict[str, tuple[str, str]] = {}
    posting = []
    for n in itertools.count():
        if stop.is_set():
            break
        user = f"learner{rng.randrange(LEARNERS)}"
        token = f"msg-{n:04d}"
        activity = peer.activity(f"a:1{user}", user, token)
        asked[activity["id"]] = (f"a:1{user}", token)
        posting.append(asyncio.create_task(peer.deliver(activity)))
        await asyncio.sleep(rng.uniform(0.05, 0.35))
    await asyncio.gather(*posting)
    return asked


async def test_every_activity_teams_delivered_is_answered_across_sigkills(tmp_path):
    seed = crash_seed()
    stop = asyncio.Event()
    peer = TeamsPeer(retry_after_s=RETRY_S)
    async with serving(peer) as base:  # type: ignore[arg-type]
        peer.base = base
        env = gateway_env(delta_delay=THINK_S, MSTEAMS_APP_PASSWORD=peer.secret)
        config = write_config(tmp_path, "msteams", "school", {
            "app_id": peer.app_id, "app_password": "env:MSTEAMS_APP_PASSWORD", **peer.settings(),
            "access": {"dm": "open"}})
        gateway = CallbackGateway(peer, "/webhooks/msteams/school", tmp_path, config, env)  # type: ignore[arg-type]
        try:
            await gateway.start()
            asked, ready = await asyncio.gather(say_all(peer, random.Random(seed), stop),
                                                kill_then_stay_down(gateway, random.Random(seed + 1), stop,
                                                                    quick_kills=QUICK_KILLS, calm=CALM_S,
                                                                    said_into_outage_s=SAID_INTO_OUTAGE_S, down_s=DOWN_S))
            acked = peer.acknowledged() & set(asked)
            await until_settled(gateway, within=HANG_S, what="the gateway still had messages or replies waiting")
        finally:
            await gateway.stop()

    shown = [s for s in peer.shown if s.text]
    answered = Counter((s.conversation, t) for s in shown for t in set(TOKEN_RE.findall(s.text)))
    lost = sorted(set(asked) - acked)
    missing = sorted(asked[a][1] for a in acked if not answered[asked[a]])
    answers = Counter(frozenset(TOKEN_RE.findall(s.text)) for s in shown)
    extra = sum(n - 1 for n in answers.values()) + answers.get(frozenset(), 0)
    print(f"msteams crash test (seed {seed}): {len(asked)} activities, {len(acked)} acknowledged, {len(lost)} given up "
          f"after {RETRIES} retries, {len(shown)} bot messages ({extra} extra, {sum(s.stream for s in shown)} streams), "
          f"{peer.refused.count(400)} refused stream updates, {len(peer.deliveries)} posts, {gateway.starts - 1} SIGKILLs, "
          f"ready after restart {min(ready):.2f}-{max(ready):.2f} s; acknowledged and unanswered {missing}")
    assert gateway.starts - 1 == KILLS
    assert any(s.stream and s.final for s in shown), "no answer came as a 1:1 stream: the stream path was not killed"
    never_reached = {a for a in asked if all(d.failed == "ConnectError" for d in peer.deliveries if d.activity_id == a)}
    assert never_reached <= set(lost) and never_reached, "the outage lost nothing: the emulator's giving up untested"
    assert not [asked[a] for a in never_reached if answered[asked[a]]], "an answer to an activity the gateway never got"
    assert not missing, f"{len(missing)} acknowledged activities never answered: {missing}"
    assert extra <= KILLS, f"{extra} bot messages beyond one per answer"
