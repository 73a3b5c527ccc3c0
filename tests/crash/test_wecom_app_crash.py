"""Every message WeCom delivered to a self-built app answered once, across SIGKILLs.

The emulated WeCom (tests/peers/wecom_app_server.py) runs in the test's process
and is never killed: ``LEARNERS`` members say numbered messages to one app while
a real ``partners serve`` on the ``wecom`` channel (``kind: app``) is SIGKILLed
``KILLS`` times and started again on the same data dir.  WeCom posts each
message signed and encrypted, and tries it again -- three retries, each 5 s
after the attempt before began -- while it gets no 200: the gateway was dead
(connection refused), died mid-request, or answered late.  The responder pauses
``2 * THINK_S`` a turn, so the kills land while answers are being written and
sent (``cgi-bin/message/send``).

A message whose every attempt failed is lost *by WeCom*: the gateway never
acknowledged it and owes it nothing.  One it acknowledged is durable and is
answered, whatever was killed after.  The checks, from the emulator's record:

- nothing missing: every acknowledged message is named by an answer;
- nothing misplaced: an answer goes to the member who asked;
- nothing twice, but for what no one can know: WeCom's ``message/send`` takes
  no idempotency key (``enable_duplicate_check`` stays off, ADR 0034), so a
  send WeCom took just before the kill, whose record the killed process never
  made, goes again -- and the outbound path lets at most one send per account
  be unrecorded at a time (ADR 0022).  So the answers beyond one per distinct
  answer number at most one per SIGKILL; breaking the record-after-send order
  makes them many more.

Set ``CRASH_SEED`` to replay a run; the seed is printed.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import time
from collections import Counter

import pytest

from tests.crash.gateway_process import GatewayProcess
from tests.crash.scenario import CallbackGateway, crash_seed, gateway_env, kill_and_restart, until_settled, write_config
from tests.peers.tencent_api import serving
from tests.peers.wecom_app_server import WecomApp
from tests.waits import HANG_S

LEARNERS, KILLS = 6, 3
THINK_S = 0.5
"""Each pause of the streaming responder: a turn takes twice this, so a kill often lands mid-answer."""
SAYING_AFTER_S = 4.0
"""Learners keep writing this long after the last restart, so the last gateway takes new messages too."""
TOKEN_RE = re.compile(r"msg-\d{4}")

pytestmark = pytest.mark.slow


def app_settings(peer: WecomApp, api_base: str) -> dict:
    return {"mode": {"kind": "app", "corpid": peer.corpid, "corpsecret": "env:WECOM_APP_SECRET",
                     "agentid": peer.agentid, "token": "env:WECOM_APP_TOKEN",
                     "encoding_aes_key": "env:WECOM_APP_AES_KEY", "api_base": api_base},
            "access": {"dm": "open"}}


async def say_all(peer: WecomApp, rng: random.Random, stop: asyncio.Event) -> dict[str, tuple[str, str]]:
    """Say numbered messages, ~5 per second, until ``stop``, each retried on its own as WeCom does;
    return MsgId -> (member, token) once WeCom is done with every one."""
    learners = [f"learner{i}" for i in range(LEARNERS)]
    asked: dict[str, tuple[str, str]] = {}
    posting = []
    for n in itertools.count():
        if stop.is_set():
            break
        member, token, msg_id = rng.choice(learners), f"msg-{n:04d}", f"{int(time.time())}{n:04d}"
        asked[msg_id] = (member, token)
        posting.append(asyncio.create_task(peer.say(member, token, msg_id=msg_id)))
        await asyncio.sleep(rng.uniform(0.05, 0.35))
    await asyncio.gather(*posting)
    return asked


async def kill_all(gateway: GatewayProcess, rng: random.Random, stop: asyncio.Event) -> list[float]:
    ready = await kill_and_restart(gateway, rng, kills=KILLS, between=(1.5, 3.5))
    await asyncio.sleep(SAYING_AFTER_S)
    stop.set()
    return ready


async def test_every_message_wecom_delivered_to_the_app_is_answered_once_across_sigkills(tmp_path):
    seed = crash_seed()
    stop = asyncio.Event()
    peer = WecomApp()
    async with serving(peer) as api_base:
        env = gateway_env(delta_delay=THINK_S, WECOM_APP_SECRET=peer.corpsecret, WECOM_APP_TOKEN=peer.token,
                          WECOM_APP_AES_KEY=peer.aes_key)
        config = write_config(tmp_path, "wecom", "school", app_settings(peer, api_base))
        gateway = CallbackGateway(peer, "/webhooks/wecom/school", tmp_path, config, env)
        try:
            await gateway.start()
            began = time.monotonic()
            asked, ready = await asyncio.gather(say_all(peer, random.Random(seed), stop),
                                                kill_all(gateway, random.Random(seed + 1), stop))

            await until_settled(gateway, within=HANG_S, what="the gateway still had messages or replies waiting")
            elapsed = time.monotonic() - began
        finally:
            await gateway.stop()

    acked = {d.msg_id for d in peer.deliveries if d.status == 200} & set(asked)
    lost_by_wecom = sorted(set(asked) - acked)
    replies = [(m["touser"], m["text"]["content"]) for m in peer.sent if m["msgtype"] == "text"]
    answered = Counter(t for _, text in replies for t in set(TOKEN_RE.findall(text)))
    answers = {(member, frozenset(TOKEN_RE.findall(text))) for member, text in replies}
    extra = len(replies) - len(answers)
    missing = sorted(token for member, token in (asked[m] for m in acked) if not answered[token])
    asker = {token: member for member, token in asked.values()}
    misplaced = sorted(t for member, text in replies for t in TOKEN_RE.findall(text) if asker.get(t) != member)
    outcomes = Counter(str(d.status) if d.status else d.failed for d in peer.deliveries)
    print(f"wecom app crash test (seed {seed}): {len(asked)} messages, {len(acked)} acknowledged, "
          f"{len(lost_by_wecom)} lost by WeCom after its retries, {len(replies)} app messages, "
          f"{len(peer.deliveries)} callbacks posted {dict(outcomes)}, {gateway.starts - 1} SIGKILLs, "
          f"ready after restart {min(ready):.2f}-{max(ready):.2f} s, settled {elapsed:.1f} s after start; "
          f"extra app messages {extra} (allowed {KILLS}), acknowledged and unanswered {missing}")
    assert gateway.starts - 1 == KILLS
    retried = {d.msg_id for d in peer.deliveries if d.attempt > 0}
    assert retried & acked, "no retry of WeCom's was ever taken: the kills missed the callbacks"
    never_reached = {m for m in asked if all(d.failed == "ConnectError" for d in peer.deliveries if d.msg_id == m)}
    assert not [asked[m] for m in never_reached if answered[asked[m][1]]], "an answer to a message the gateway never got"
    assert not missing, f"{len(missing)} acknowledged messages never answered: {missing}"
    assert not misplaced, f"answers sent to another member: {misplaced}"
    assert extra <= KILLS, f"{extra} app messages beyond one per answer: {explain(replies)}"
    assert all(TOKEN_RE.search(text) for _, text in replies), "an app message answering nothing"


def explain(replies: list[tuple[str, str]]) -> str:
    """Each answer sent more than once: what a failure needs."""
    counted = Counter((member, text) for member, text in replies)
    return "; ".join(f"{member}: {text!r} x{n}" for (member, text), n in counted.items() if n > 1)
