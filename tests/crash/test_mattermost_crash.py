"""Every message answered, across SIGKILLs, on Mattermost -- and at most one repeat per kill.

Mattermost's websocket replays nothing: a post made while no socket of ours
was open, or pushed to a process killed before it stored it, reaches the
gateway only by the catch-up over REST from the durable per-channel positions.
So here "every message" is every message *said*, those said while the gateway
was dead included.  A real ``partners serve`` on the ``mattermost`` channel
(httpx and the kit's websocket session against the loopback Mattermost, in the
test's process and never killed) is SIGKILLed ``KILLS`` times mid-answer (the
echo responder streams, so patched previews are on the path being killed)
while learners in ``CHATS`` -- direct messages, and class channels where each
post mentions the bot -- say ``MESSAGES`` numbered messages.

``POST /posts`` takes no idempotency key, so a post Mattermost made whose answer
the killed process never recorded is posted again by the next one (ADR 0022).
The checks, from the emulator's record:

- nothing missing: every message said is named by a bot post;
- nothing misplaced: an answer shows in the channel it was asked in;
- bot posts beyond one per distinct answer (a second copy, a preview left
  behind showing no number) number at most one per SIGKILL.

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
from tests.waits import HANG_S

need_module("websockets")

from tests.peers.mattermost_server import MattermostServer  # noqa: E402 -- after the SDK check above

pytestmark = pytest.mark.slow

MESSAGES, KILLS = 60, 3
REPEATS_PER_KILL = 1
TOKEN_RE = re.compile(r"msg-\d{4}")
CHATS = {**{f"d{i}" + "0" * 24: "D" for i in range(4)}, **{f"o{i}" + "0" * 24: "O" for i in range(2)}}


async def say_all(server: MattermostServer, rng: random.Random) -> dict[str, str]:
    """Say MESSAGES numbered messages, the gateway up or not; token -> channel."""
    asked: dict[str, str] = {}
    for n in range(MESSAGES):
        chat, token = rng.choice(sorted(CHATS)), f"msg-{n:04d}"
        await server.say(token, channel=chat, user=f"u{chat[:25]}", kind=CHATS[chat], mention=CHATS[chat] == "O")
        asked[token] = chat
        await asyncio.sleep(rng.uniform(0, 0.08))
    return asked


async def test_every_message_is_answered_and_a_sigkill_repeats_at_most_one_answer(tmp_path):
    seed = crash_seed()
    rng = random.Random(seed)
    async with MattermostServer() as server:
        for chat, kind in CHATS.items():
            server.room(chat, kind)
        env = gateway_env(delta_delay=0.01, MATTERMOST_TOKEN=server.token)
        settings = {"url": server.url, "token": "env:MATTERMOST_TOKEN", "access": {"dm": "open", "group": "mention"}}
        gateway = GatewayProcess(tmp_path, write_config(tmp_path, "mattermost", "school", settings), env)
        try:
            await gateway.start()
            await server.connected()
            asked, _ = await asyncio.gather(say_all(server, rng),
                                            kill_and_restart(gateway, rng, kills=KILLS, between=(0.8, 1.6)))

            def answered_tokens() -> set[str]:
                return {t for chat in CHATS for p in server.shown(chat) for t in TOKEN_RE.findall(p.message)}

            async def all_answered() -> bool:
                return answered_tokens() >= set(asked) and await gateway.backlog() == 0

            await wait_until(all_answered, within=2 * HANG_S, what="not every message was answered", poll=0.25)
            await gateway.stop()
        finally:
            await gateway.stop()
        posts = [(chat, p.message) for chat in CHATS for p in server.shown(chat)]
        unheard = server.unheard
    for chat, message in posts:
        for token in TOKEN_RE.findall(message):
            assert asked[token] == chat, f"{token} asked in {asked[token]}, answered in {chat}"
    answers = Counter(frozenset(TOKEN_RE.findall(message)) for _, message in posts)
    extras = len(posts) - len(set(answers) - {frozenset()})
    print(f"mattermost crash test (seed {seed}): {len(asked)} messages, {len(posts)} bot posts, "
          f"{gateway.starts - 1} SIGKILLs, {unheard} said with no socket open, extra posts {extras}")
    assert gateway.starts - 1 == KILLS
    assert extras <= KILLS * REPEATS_PER_KILL, (
        f"seed {seed}: {extras} extra posts over {KILLS} kills: {[(sorted(k), n) for k, n in answers.items() if n > 1]}")
