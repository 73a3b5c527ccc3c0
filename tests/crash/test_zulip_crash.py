"""Every message answered, across SIGKILLs and a lost event queue, on Zulip -- and a kill repeats at most one answer.

Zulip keeps a queue's events until a poll names a later event id, and keeps
every message for ``GET /messages``; so here "every message" is every message
*said*, the ones said while the gateway was dead or no queue existed included.
A real ``partners serve`` on the ``zulip`` channel (httpx against the loopback
Zulip, in the test's process and never killed) is SIGKILLed ``KILLS`` times
mid-answer (the echo responder streams, so answers are being edited) while
learners say ``MESSAGES`` numbered messages in DMs and in two topics of a
stream; halfway, Zulip forgets every queue (its garbage collection), so one
restart -- or the running process -- meets ``BAD_EVENT_QUEUE_ID`` and must catch up.

``POST /messages`` takes no idempotency key, so a send Zulip made whose answer
the killed process never recorded is sent again by the next one.  The checks:

- nothing missing: every message said is named by an answer;
- nothing invented, nothing misplaced: every answer names a message said in its conversation
  (the person, or the stream *and topic*);
- extras (answers beyond one per message) number at most one per SIGKILL.

Set ``CRASH_SEED`` to replay a run; the seed is printed.
"""

from __future__ import annotations

import asyncio
import random
import re
import uuid
from collections import Counter

import pytest

from tests.crash.gateway_process import GatewayProcess
from tests.crash.scenario import crash_seed, gateway_env, kill_and_restart, wait_until, write_config
from tests.peers.zulip_server import BOT_EMAIL, ZulipServer
from tests.waits import HANG_S

pytestmark = pytest.mark.slow

MESSAGES, LEARNERS, KILLS = 60, 4, 3
REPEATS_PER_KILL = 1
TOKEN_RE = re.compile(r"msg-\d{4}")
PLACES = (*((f"Learner {i}", None) for i in range(LEARNERS)), ("Class Member", "primes"), ("Class Member", "fractions"))


def settings(server: ZulipServer) -> dict:
    return {"site": server.url, "email": BOT_EMAIL, "api_key": "env:ZULIP_KEY", "poll_timeout_s": 10.0,
            "access": {"dm": "open", "group": "mention"}}


async def say_all(server: ZulipServer, rng: random.Random) -> dict[str, tuple[str, str | None]]:
    """Say MESSAGES numbered messages, the gateway up or not; token -> (chat, topic)."""
    asked: dict[str, tuple[str, str | None]] = {}
    for n in range(MESSAGES):
        user, topic = rng.choice(PLACES)
        token = f"msg-{n:04d}"
        if topic is None:
            said = await server.say(token, user=user)
        else:
            said = await server.say(token, user=user, stream="algebra", topic=topic, mention=True)
        asked[token] = (said.chat, topic)
        if n == MESSAGES // 2:
            server.expire_queues()
        await asyncio.sleep(rng.uniform(0, 0.08))
    return asked


async def test_every_message_is_answered_and_a_sigkill_repeats_at_most_one_answer(tmp_path):
    seed = crash_seed()
    rng = random.Random(seed)
    async with ZulipServer(key="zk" + uuid.uuid4().hex, heartbeat_s=0.5) as server:
        env = gateway_env(delta_delay=0.01, ZULIP_KEY=server.key)
        gateway = GatewayProcess(tmp_path, write_config(tmp_path, "zulip", "school", settings(server)), env)
        try:
            await gateway.start()
            await wait_until(lambda: server.polls >= 1, within=HANG_S, what="the bot never polled its queue")
            asked, _ = await asyncio.gather(say_all(server, rng),
                                            kill_and_restart(gateway, rng, kills=KILLS, between=(0.8, 1.6)))

            def answered_tokens() -> set[str]:
                return {t for s in server.sent for t in TOKEN_RE.findall(s.content)}

            async def all_answered() -> bool:
                return answered_tokens() >= set(asked) and await gateway.backlog() == 0

            await wait_until(all_answered, within=2 * HANG_S, what="not every message was answered", poll=0.25)
            await gateway.stop()
        finally:
            await gateway.stop()
        assert server.registers >= 2 and server.catch_ups >= 1, "the lost queue was never registered again"
        for shown in server.sent:
            for token in TOKEN_RE.findall(shown.content):
                assert asked[token] == (shown.chat, shown.topic), f"{token} asked in {asked[token]}, answered in {shown}"
        answers = Counter(tuple(TOKEN_RE.findall(s.content)) for s in server.sent)
        extras = sum(n - 1 for n in answers.values())
        print(f"seed {seed}: {len(server.sent)} answers, {extras} extra over {KILLS} kills, {server.registers} queues")
        assert extras <= KILLS * REPEATS_PER_KILL, (
            f"seed {seed}: {extras} extra answers over {KILLS} kills: {[(k, n) for k, n in answers.items() if n > 1]}")
