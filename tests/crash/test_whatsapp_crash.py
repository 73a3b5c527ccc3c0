"""Every message Meta delivered answered, across SIGKILLs, on a WhatsApp number's webhook -- a kill repeats at most one.

The Cloud API emulator runs in the test's process (never killed): learners say
numbered messages while a real ``partners serve`` on the ``whatsapp`` channel
is SIGKILLed ``KILLS`` times mid-answer (the echo responder streams slowly,
``THINK_S`` a delta) and started again on the same data dir.  The emulator
posts each webhook as Meta does: signed, and posted again -- ``RETRIES`` times,
``retry_after_s`` apart -- while the answer is not a 200, whether the gateway
was dead or died mid-request.  Each message comes from a learner of its own,
so WhatsApp's pair rate (one message to a user per 6 s) paces nothing.

The Cloud API takes no idempotency key: a message Meta took just before a kill,
whose record the killed process never made durable, is sent again by the next
one.  The outbound path keeps that to one send per account (ADR 0022, ADR 0049).
From the emulator's record:

- nothing missing: every acknowledged message (some attempt got a 200) is answered;
- nothing invented: every answer names a message said, to its learner;
- extras (answers beyond one per message) number at most one per SIGKILL.

Set ``CRASH_SEED`` to replay a run; the seed is printed.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter

import pytest

from tests.crash.scenario import CallbackGateway, crash_seed, gateway_env, kill_and_restart, until_settled, write_config
from tests.peers.tencent_api import serving
from tests.peers.whatsapp_server import VERSION, WhatsappPeer
from tests.waits import HANG_S

MESSAGES, KILLS = 60, 3
REPEATS_PER_KILL = 1
THINK_S = 0.3
RETRY_S = 2.0
TOKEN_RE = re.compile(r"msg-\d{4}")

pytestmark = pytest.mark.slow


async def say_all(peer: WhatsappPeer, rng: random.Random) -> dict[str, str]:
    """Say MESSAGES numbered messages, each retried on its own as Meta does; wamid -> token once Meta is done."""
    asked: dict[str, str] = {}
    posting = []
    for n in range(MESSAGES):
        token, wamid = f"msg-{n:04d}", f"wamid.crash{n:04d}"
        asked[wamid] = token
        posting.append(asyncio.create_task(peer.say(f"1555900{n:04d}", token, wamid=wamid)))
        await asyncio.sleep(rng.uniform(0.05, 0.25))
    await asyncio.gather(*posting)
    return asked


async def test_every_message_meta_delivered_is_answered_and_a_sigkill_repeats_at_most_one(tmp_path):
    seed = crash_seed()
    peer = WhatsappPeer(retry_after_s=RETRY_S)
    async with serving(peer) as base:  # type: ignore[arg-type]
        peer.base = base
        env = gateway_env(delta_delay=THINK_S, WA_TOKEN=peer.token, WA_SECRET=peer.app_secret, WA_VERIFY="v")
        config = write_config(tmp_path, "whatsapp", "school", {
            "phone_number_id": peer.phone_number_id, "access_token": "env:WA_TOKEN", "app_secret": "env:WA_SECRET",
            "verify_token": "env:WA_VERIFY", "graph_base": base.rstrip("/"), "api_version": VERSION,
            "access": {"dm": "open"}})
        gateway = CallbackGateway(peer, "/webhooks/whatsapp/school", tmp_path, config, env)  # type: ignore[arg-type]
        try:
            await gateway.start()
            asked, ready = await asyncio.gather(say_all(peer, random.Random(seed)),
                                                kill_and_restart(gateway, random.Random(seed + 1), kills=KILLS,
                                                                 between=(1.0, 2.0)))
            acked = {wamid for wamid, status in peer.deliveries if status == 200} & set(asked)
            await until_settled(gateway, within=HANG_S, what="the gateway still had messages or replies waiting")
        finally:
            await gateway.stop()

    by_token = {token: f"1555900{int(token[4:]):04d}" for token in asked.values()}
    answers = Counter(t for s in peer.shown for t in set(TOKEN_RE.findall(s.text)))
    missing = sorted(asked[m] for m in acked if not answers[asked[m]])
    extras = sum(n - 1 for n in answers.values())
    print(f"whatsapp crash test (seed {seed}): {len(asked)} messages, {len(acked)} acknowledged, {len(peer.shown)} "
          f"bot messages, {len(peer.deliveries)} webhooks posted, {gateway.starts - 1} SIGKILLs, ready after restart "
          f"{min(ready):.2f}-{max(ready):.2f} s; unanswered {missing}, extras {extras}")
    assert gateway.starts - 1 == KILLS
    assert not missing, f"{len(missing)} acknowledged messages never answered: {missing}"
    for shown in peer.shown:
        tokens = TOKEN_RE.findall(shown.text)
        assert tokens, f"a bot message answering nothing: {shown.text[:60]!r}"
        assert all(by_token[t] == shown.to for t in tokens), f"{tokens} answered to {shown.to}"
    assert extras <= KILLS * REPEATS_PER_KILL, f"seed {seed}: {extras} extra answers over {KILLS} kills"
