"""Every message WeChat delivered answered once, across SIGKILLs, on a WeChat Official Account.

The WeChat emulator runs in the test's process (never killed): ``LEARNERS``
learners say numbered messages to one safe-mode Official Account, while a real
``partners serve`` on the ``weixin`` channel (``kind: official_account``) is
SIGKILLed ``KILLS`` times and started again on the same data dir -- twice at
once, and the last time only after ``DOWN_S``, longer than WeChat keeps
trying, with learners still writing in its first seconds.  The emulator posts
each message as WeChat does: signed and encrypted, and tried again -- three
retries, each 5 s after the attempt before began -- while it gets no valid
answer, whether the answer was late, or the gateway was dead (connection
refused) or died mid-request.  The responder takes ``2 * THINK_S`` a turn, so
answers ride back passively in the callback's response and also go as
customer-service messages.

A message whose every attempt failed is lost *by WeChat*: the gateway never
acknowledged it and owes it nothing (one it stored before the kill cut off its
answer is durable, and is answered all the same).  The checks, from the
emulator's record:

- what WeChat lost is counted: the outage loses some messages, and one that
  never reached a gateway is never answered;

- nothing missing: every acknowledged message (some attempt got ``success`` or
  a passive reply) is answered, passively or by customer-service message;
- never both, passively and by customer-service message: the bot messages
  beyond one per answer number at most one per SIGKILL.  WeChat takes no
  idempotency key, so a customer-service message WeChat took just before the
  kill, or a passive answer whose response was written, whose record the
  gateway had not yet made durable, goes again (ADR 0022: one send per
  account on the wire).  The other way round loses nothing: a passive answer
  counts sent only once its response was written (passive.py), so a kill
  before that leaves the part to go again, to WeChat's retry.

Breaking the claim -- a passive answer also sent as a customer-service
message -- makes nearly every answer two bot messages, far past ``KILLS``.

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

from tests.crash.scenario import (
    CallbackGateway,
    crash_seed,
    gateway_env,
    kill_then_stay_down,
    until_settled,
    write_config,
)
from tests.peers.tencent_api import RETRIES, serving
from tests.peers.weixin_oa_server import WechatOA
from tests.waits import HANG_S

LEARNERS, QUICK_KILLS = 6, 2
THINK_S = 0.8
"""Each pause of the streaming responder: a turn takes twice this, so a learner's queue outlasts the 4.5 s
the callback waits, and answers go both ways -- in the response and as customer-service messages."""
DOWN_S = RETRIES * 5.0 + 3
"""The last kill's outage: longer than WeChat's three retries 5 s apart, so what is said in its first
seconds is lost by WeChat."""
SAID_INTO_OUTAGE_S = 2.0
CALM_S = (6.0, 8.0)
"""Up between the quick kills and the outage: WeChat's retries of what the quick kills cut off land here."""
KILLS = QUICK_KILLS + 1
TOKEN_RE = re.compile(r"msg-\d{4}")

pytestmark = pytest.mark.slow


def oa_settings(oa: WechatOA, api_base: str) -> dict:
    return {"kind": "official_account", "appid": oa.appid, "appsecret": "env:WEIXIN_APPSECRET",
            "token": "env:WEIXIN_TOKEN", "encoding_aes_key": "env:WEIXIN_AES_KEY", "mode": oa.mode,
            "api_base": api_base, "access": {"dm": "open"}}


async def say_all(oa: WechatOA, rng: random.Random, stop: asyncio.Event) -> dict[str, str]:
    """Say numbered messages, ~5 per second, until ``stop``, each retried on its own as WeChat does;
    return MsgId -> token once WeChat is done with every one."""
    learners = [f"o-learner-{i}" for i in range(LEARNERS)]
    asked: dict[str, str] = {}
    posting = []
    for n in itertools.count():
        if stop.is_set():
            break
        token, msg_id = f"msg-{n:04d}", f"{int(time.time())}{n:04d}"
        asked[msg_id] = token
        posting.append(asyncio.create_task(oa.say(rng.choice(learners), token, msg_id=msg_id)))
        await asyncio.sleep(rng.uniform(0.05, 0.35))
    await asyncio.gather(*posting)
    return asked


async def test_every_message_wechat_delivered_is_answered_once_across_sigkills(tmp_path):
    seed = crash_seed()
    stop = asyncio.Event()
    oa = WechatOA(mode="safe")
    async with serving(oa) as api_base:
        env = gateway_env(delta_delay=THINK_S, WEIXIN_APPSECRET=oa.appsecret, WEIXIN_TOKEN=oa.token, WEIXIN_AES_KEY=oa.aes_key)
        config = write_config(tmp_path, "weixin", "school", oa_settings(oa, api_base))
        gateway = CallbackGateway(oa, "/webhooks/weixin/school", tmp_path, config, env)
        try:
            await gateway.start()
            began = time.monotonic()
            asked, ready = await asyncio.gather(say_all(oa, random.Random(seed), stop),
                                                kill_then_stay_down(gateway, random.Random(seed + 1), stop,
                                                                    quick_kills=QUICK_KILLS, calm=CALM_S,
                                                                    said_into_outage_s=SAID_INTO_OUTAGE_S, down_s=DOWN_S))
            acked = oa.acknowledged() & set(asked)

            def shown() -> Counter[str]:
                return Counter(t for m in oa.sent for t in set(TOKEN_RE.findall(m["text"]["content"])))

            await until_settled(gateway, within=HANG_S, what="the gateway still had messages or replies waiting")
            elapsed = time.monotonic() - began
        finally:
            await gateway.stop()

    answered = shown()
    replies = [m for m in oa.sent if TOKEN_RE.search(m["text"]["content"])]
    answers = {frozenset(TOKEN_RE.findall(m["text"]["content"])) for m in replies}
    extra = len(oa.sent) - len(answers)
    lost_by_wechat = sorted(set(asked) - acked)
    missing = sorted(token for token in (asked[m] for m in acked) if not answered[token])
    passive = sum(1 for m in oa.sent if m.get("via") == "passive")
    outcomes = Counter("passive" if d.body.startswith("<xml>") else d.body or d.failed or str(d.status) for d in oa.deliveries)
    print(f"weixin crash test (seed {seed}): {len(asked)} messages, {len(acked)} acknowledged, "
          f"{len(lost_by_wechat)} lost by WeChat after {RETRIES} retries, {len(oa.sent)} bot messages "
          f"({passive} passive), {len(oa.deliveries)} callbacks posted {dict(outcomes)}, {gateway.starts - 1} SIGKILLs, "
          f"ready after restart {min(ready):.2f}-{max(ready):.2f} s, settled {elapsed:.1f} s after start; "
          f"extra bot messages {extra} (allowed {KILLS}), acknowledged and unanswered {missing}")
    assert gateway.starts - 1 == KILLS
    never_reached = {m for m in asked if all(d.failed == "ConnectError" for d in oa.deliveries if d.msg_id == m)}
    assert never_reached <= set(lost_by_wechat) and never_reached, "the outage lost nothing: WeChat's giving up untested"
    assert not [asked[m] for m in never_reached if answered[asked[m]]], "an answer to a message the gateway never got"
    assert not missing, f"{len(missing)} acknowledged messages never answered: {missing}"
    assert extra <= KILLS, f"{extra} bot messages beyond one per answer: {explain(oa, answered)}"
    assert not [m for m in oa.sent if not TOKEN_RE.search(m["text"]["content"])], "a bot message answering nothing"


def explain(oa: WechatOA, answered: Counter[str]) -> str:
    """Each token shown more than once, and how: what a failure needs."""
    return "; ".join(f"{token}: {[m.get('via', 'custom/send') for m in oa.sent if token in m['text']['content']]}"
                     for token, n in sorted(answered.items()) if n > 1)
