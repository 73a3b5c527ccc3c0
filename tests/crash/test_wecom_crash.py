"""Every message answered, across SIGKILLs, on WeCom's AI bot -- and a kill repeats at most one answer.

The long-connection emulator runs in the test's process (never killed) in its
``hold`` mode: what learners say while no bot is connected is kept, and at each
subscribe every callback whose chat shows no finished answer to it is sent
again (same ``msgid``, new ``req_id``).  A real ``partners serve`` on the
``wecom`` channel, through wecom-aibot-sdk, is SIGKILLed ``KILLS`` times while
learners in 6 DMs and 2 groups (every group message @-mentions the bot) say
``MESSAGES`` numbered messages.  The responder streams (two deltas), so stream
updates and finishes are on the path being killed.

WeCom takes no idempotency key for a stream's finish, so a stream finished at
WeCom whose ack the killed process never recorded may be finished again by the
next one.  The checks, from the emulator's record:

- nothing missing: every numbered message is named by a finished answer;
- nothing misplaced: an answer shows in the chat it was asked in;
- extras (a finished stream beyond one per distinct answer, or a stream left
  unfinished) number at most one per SIGKILL.

Set ``CRASH_SEED`` to replay a run; the seed is printed.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter

import pytest

from tests.crash.gateway_process import GatewayProcess
from tests.crash.scenario import crash_seed, gateway_env, kill_and_restart, wait_until, write_config
from tests.extras import need_module
from tests.peers.wecom_server import WecomServer
from tests.waits import HANG_S

need_module("wecom_aibot_sdk")
pytestmark = pytest.mark.slow

MESSAGES, DMS, GROUPS, KILLS = 60, 6, 2, 3
REPEATS_PER_KILL = 1
TOKEN_RE = re.compile(r"msg-\d{4}")


def bot_settings(server: WecomServer) -> dict:
    return {"mode": {"kind": "ai_bot", "bot_id": server.bot_id, "secret": "env:WECOM_BOT_SECRET", "ws_url": server.url},
            "access": {"dm": "open", "group": "mention"}}


async def say_all(server: WecomServer, rng: random.Random) -> dict[str, str]:
    """Say MESSAGES numbered messages; return token -> chat."""
    chats = [f"wrGROUP{i}" for i in range(GROUPS)] + [f"learner{i}" for i in range(DMS)]
    asked: dict[str, str] = {}
    for n in range(MESSAGES):
        chat = rng.choice(chats)
        token = f"msg-{n:04d}"
        if chat.startswith("wr"):
            await server.say(token, user=f"member{rng.randrange(3)}", group=chat)
        else:
            await server.say(token, user=chat)
        asked[token] = chat
        await asyncio.sleep(rng.uniform(0, 0.08))
    return asked


async def test_every_message_is_answered_and_a_sigkill_repeats_at_most_one_answer(tmp_path):
    seed = crash_seed()
    rng = random.Random(seed)
    async with WecomServer(bot_id=f"aibcrash{seed}") as server:
        server.hold = True
        env = gateway_env(delta_delay=0.01, WECOM_BOT_SECRET=server.secret)
        gateway = GatewayProcess(tmp_path, write_config(tmp_path, "wecom", "school", bot_settings(server)), env)
        try:
            await gateway.start()
            await server.connected()
            asked, _ = await asyncio.gather(say_all(server, rng),
                                            kill_and_restart(gateway, rng, kills=KILLS, between=(0.8, 1.6)))

            def answered_tokens() -> set[str]:
                return {t for s in server.timeline if s.finished for t in TOKEN_RE.findall(s.content)}

            async def all_answered() -> bool:
                return answered_tokens() >= set(asked) and await gateway.backlog() == 0

            await wait_until(all_answered, within=2 * HANG_S, what="not every message was answered", poll=0.25)
            await gateway.stop()
        finally:
            await gateway.stop()
        finished = [s for s in server.timeline if s.finished]
        for shown in finished:
            for token in TOKEN_RE.findall(shown.content):
                assert asked[token] == shown.chat, f"{token} asked in {asked[token]}, answered in {shown.chat}"
        answers = Counter(frozenset(TOKEN_RE.findall(s.content)) for s in finished)
        extras = sum(n - 1 for n in answers.values()) + sum(1 for s in server.timeline if not s.finished)
        extras += sum(s.after_finish for s in finished)
        assert extras <= KILLS * REPEATS_PER_KILL, (
            f"seed {seed}: {extras} extra answers over {KILLS} kills: "
            f"{[(sorted(k), n) for k, n in answers.items() if n > 1]}")
