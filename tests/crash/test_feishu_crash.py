"""Every message answered exactly once, across SIGKILLs, on Feishu's long connection.

The emulator runs in the test's process (never killed) and does what Feishu documents: an event
not acked is delivered again (same ``event_id``), here at the next connection (``hold``).  A real
``partners serve`` on the ``feishu`` channel -- the long connection through lark-oapi, REST on the
channel's httpx -- is SIGKILLed ``KILLS`` times while learners in 6 direct chats and 2 groups say
``MESSAGES`` numbered messages.  Answers stream into CardKit cards (the responder streams two
deltas), so card creates, content updates and the closing settings are on the path being killed.

A reply's message carries a ``uuid`` made from the reply's key, and Feishu answers a second send with
that uuid with the first message's id: a killed process's reply is not shown twice.  From the emulator:

- nothing missing: every numbered message is named by a finished answer;
- nothing misplaced: an answer shows in the chat it was asked in;
- nothing twice: each message is named by exactly one shown reply;
- every event acked in the end: nothing left for Feishu to deliver again.

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
from tests.peers.feishu_server import FeishuServer
from tests.waits import HANG_S

need_module("lark_oapi")
pytestmark = pytest.mark.slow

MESSAGES, DMS, GROUPS, KILLS = 60, 6, 2, 3
TOKEN_RE = re.compile(r"msg-\d{4}")


def app_settings(server: FeishuServer) -> dict:
    return {"app_id": server.app_id, "app_secret": "env:FEISHU_APP_SECRET", "domain": server.url,
            "access": {"dm": "open", "group": "mention"}}


async def say_all(server: FeishuServer, rng: random.Random) -> dict[str, str]:
    """Say MESSAGES numbered messages; return token -> chat."""
    chats = [f"oc_group{i}" for i in range(GROUPS)] + [f"oc_dm{i}" for i in range(DMS)]
    asked: dict[str, str] = {}
    for n in range(MESSAGES):
        chat = rng.choice(chats)
        token = f"msg-{n:04d}"
        if "group" in chat:
            await server.say(token, user=f"ou_member{rng.randrange(3)}", chat=chat, group=True, mention=True)
        else:
            await server.say(token, user=f"ou_{chat}", chat=chat)
        asked[token] = chat
        await asyncio.sleep(rng.uniform(0, 0.08))
    return asked


async def test_every_message_is_answered_exactly_once_across_sigkills(tmp_path):
    seed = crash_seed()
    rng = random.Random(seed)
    async with FeishuServer(app_id=f"cli_crash{seed}", secret=f"Fs{seed}q7Vb2Nm9") as server:
        server.hold = True
        env = gateway_env(delta_delay=0.01, FEISHU_APP_SECRET=server.secret)
        gateway = GatewayProcess(tmp_path, write_config(tmp_path, "feishu", "school", app_settings(server)), env)
        try:
            await gateway.start()
            await server.connected()
            asked, _ = await asyncio.gather(say_all(server, rng),
                                            kill_and_restart(gateway, rng, kills=KILLS, between=(0.8, 1.6)))

            def finished() -> list[str]:
                return [server.text_of(m) for m in server.messages if server.finished(m)]

            async def all_answered() -> bool:
                named = {t for text in finished() for t in TOKEN_RE.findall(text)}
                return named >= set(asked) and await gateway.backlog() == 0 and not server.pending

            await wait_until(all_answered, within=2 * HANG_S, what="not every message was answered", poll=0.25)
            await gateway.stop()
        finally:
            await gateway.stop()
        for shown in server.messages:
            for token in TOKEN_RE.findall(server.text_of(shown)):
                assert asked[token] == shown.chat, f"{token} asked in {asked[token]}, answered in {shown.chat}"
        named = Counter(t for m in server.messages for t in TOKEN_RE.findall(server.text_of(m)))
        twice = sorted(t for t, n in named.items() if n > 1)
        assert twice == [], f"seed {seed}: answered more than once: {twice}"
        unfinished = [server.text_of(m) for m in server.messages if not server.finished(m)]
        assert unfinished == [], f"seed {seed}: cards left streaming: {unfinished}"
        assert server.pending == {}
