"""Every message QQ delivered answered exactly once, across SIGKILLs, on a QQ bot's webhook.

The QQ emulator runs in the test's process (never killed): ``LEARNERS``
learners say numbered C2C messages, while a real ``partners serve`` on the
``qq`` channel is SIGKILLed ``KILLS`` times and started again on the same data
dir -- twice at once, and the last time only after ``DOWN_S``, longer than QQ
keeps trying, with learners still writing in its first seconds.  The emulator
posts each event as QQ does: signed, and posted again -- three retries,
``retry_after_s`` apart -- while the answer is not op 12, whether the gateway
was dead (connection refused) or died mid-request.  The responder streams
slowly (``THINK_S`` a delta), so kills land mid-answer.

A message whose every attempt failed is lost *by QQ*: the gateway never
acknowledged it and owes it nothing.  From the emulator's record:

- what QQ lost is counted, and one that never reached a gateway is never answered;
- nothing missing: every acknowledged message (some attempt got op 12) is answered;
- nothing twice: unlike a platform without idempotency keys, QQ drops a second
  post of one ``msg_id`` + ``msg_seq``, and ``msg_seq`` is the part's key's
  (ADR 0044) -- so a reply QQ took just before a kill, whose record the gateway
  had not yet made durable, is resent, refused as a duplicate, and shown once.
  The bot messages number exactly one per answer.

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
from tests.peers.qq_server import RETRIES, QQPeer
from tests.peers.tencent_api import serving
from tests.waits import HANG_S

LEARNERS, QUICK_KILLS = 6, 2
THINK_S = 0.4
RETRY_S = 3.0
DOWN_S = RETRIES * RETRY_S + 3
"""The last kill's outage: longer than QQ's three retries, so what is said in its first seconds is lost by QQ."""
SAID_INTO_OUTAGE_S = 2.0
CALM_S = (5.0, 7.0)
KILLS = QUICK_KILLS + 1
TOKEN_RE = re.compile(r"msg-\d{4}")

pytestmark = pytest.mark.slow


async def say_all(peer: QQPeer, rng: random.Random, stop: asyncio.Event) -> dict[str, str]:
    """Say numbered messages, ~5 per second, until ``stop``, each retried on its own as QQ does;
    return msg_id -> token once QQ is done with every one."""
    learners = [f"LEARNER{i:04d}" for i in range(LEARNERS)]
    asked: dict[str, str] = {}
    posting = []
    for n in itertools.count():
        if stop.is_set():
            break
        token, msg_id = f"msg-{n:04d}", f"ROBOT1.0_crash{n:04d}"
        asked[msg_id] = token
        posting.append(asyncio.create_task(peer.say(rng.choice(learners), token, msg_id=msg_id)))
        await asyncio.sleep(rng.uniform(0.05, 0.35))
    await asyncio.gather(*posting)
    return asked


async def test_every_message_qq_delivered_is_answered_exactly_once_across_sigkills(tmp_path):
    seed = crash_seed()
    stop = asyncio.Event()
    peer = QQPeer(retry_after_s=RETRY_S)
    async with serving(peer) as api_base:  # type: ignore[arg-type]
        env = gateway_env(delta_delay=THINK_S, QQ_APP_SECRET=peer.secret)
        config = write_config(tmp_path, "qq", "school", {
            "app_id": peer.app_id, "app_secret": "env:QQ_APP_SECRET", "api_base": api_base,
            "token_url": f"{api_base}app/getAppAccessToken", "access": {"dm": "open"}})
        gateway = CallbackGateway(peer, "/webhooks/qq/school", tmp_path, config, env)  # type: ignore[arg-type]
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

    answered = Counter(t for m in peer.sent for t in set(TOKEN_RE.findall(m["content"])))
    lost_by_qq = sorted(set(asked) - acked)
    missing = sorted(asked[m] for m in acked if not answered[asked[m]])
    twice = sorted(t for t, n in answered.items() if n > 1)
    duplicates = peer.refused.count(40054005)
    print(f"qq crash test (seed {seed}): {len(asked)} messages, {len(acked)} acknowledged, {len(lost_by_qq)} lost by QQ "
          f"after {RETRIES} retries, {len(peer.sent)} bot messages, {duplicates} resends QQ dropped as duplicates, "
          f"{len(peer.deliveries)} events posted, {gateway.starts - 1} SIGKILLs, ready after restart "
          f"{min(ready):.2f}-{max(ready):.2f} s; acknowledged and unanswered {missing}, shown twice {twice}")
    assert gateway.starts - 1 == KILLS
    never_reached = {m for m in asked if all(d.failed == "ConnectError" for d in peer.deliveries if d.msg_id == m)}
    assert never_reached <= set(lost_by_qq) and never_reached, "the outage lost nothing: QQ's giving up untested"
    assert not [asked[m] for m in never_reached if answered[asked[m]]], "an answer to a message the gateway never got"
    assert not missing, f"{len(missing)} acknowledged messages never answered: {missing}"
    assert not twice, f"shown twice: {twice}"
    assert not [m for m in peer.sent if not TOKEN_RE.search(m["content"])], "a bot message answering nothing"
