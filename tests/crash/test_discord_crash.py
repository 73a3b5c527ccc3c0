"""Every message a user posted answered exactly once, across SIGKILLs, on Discord.

The Gateway + REST emulator runs in the test's process (never killed); a real
``partners serve`` on the ``discord`` channel is SIGKILLed ``KILLS`` times while
learners in 10 DMs and 3 guild channels (every message mentions the bot) say
``MESSAGES`` numbered messages.  Every send answers ``SEND_LATENCY_S`` after it
was posted, about 5 % are answered 429 first, and the responder streams (two
deltas), so previews edited in place are on the path being killed.

Discord has no per-event acknowledgement and a new process identifies a new
session, so what was posted while the gateway was down, or dispatched to a
killed process and not yet stored, comes back by the REST catch-up from each
known channel's cursor on the next READY (docs/adr/0027-discord-channel.md).
Every DM and room is spoken in once before the kills begin, so each channel is
known to the cursor (a DM first opened while the bot is down is not: Discord
has no call listing a bot's DMs).  The checks, from the emulator's record:

- every message the emulator holds from a user is answered by exactly one
  visible bot message, in its own channel -- sends carry a nonce Discord
  deduplicates, so a send repeated after a kill returns the first;
- no bot message answers nothing (no preview left behind).

Set ``CRASH_SEED`` to replay a run; the seed is printed.
"""

from __future__ import annotations

import asyncio
import random
import re
import sqlite3
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest
import yaml

from tests.contract.discord_harness import new_token
from tests.crash.gateway_process import GatewayProcess
from tests.crash.scenario import crash_seed, gateway_env, kill_and_restart, wait_until
from tests.peers.discord_server import DiscordPeer
from tests.waits import HANG_S

MESSAGES, DMS, ROOMS, KILLS = 120, 10, 3, 3
SEND_LATENCY_S = 0.1
TOKEN_RE = re.compile(r"msg-\d{4}")

pytestmark = pytest.mark.slow


def write_config(workdir: Path, peer: DiscordPeer) -> Path:
    config = {
        "data_dir": str(workdir / "data"),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "discord", "account": "main"}],
        "channels": {"discord": {"main": {
            "token": "env:DISCORD_TOKEN", "api_base": peer.api_base, "gateway_url": peer.gateway_url,
            "slash_commands": False, "access": {"dm": "open", "group": "mention"},
        }}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1, "delivery_max_attempts": 50},
    }
    path = workdir / "partners.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def accepted(database: Path) -> set[str]:
    with closing(sqlite3.connect(database)) as db:
        return {row[0] for row in db.execute("SELECT event_id FROM inbound WHERE channel = 'discord'")}


async def say(peer: DiscordPeer, token: str, where: str, rooms: list[str]) -> dict:
    live = peer.connected()
    if where in rooms:
        message = await peer.say(token, channel=where, mention=True)
    else:
        message = await peer.say(token, user=where)
    return {"id": message["id"], "channel": message["channel_id"], "live": live, "at": time.time()}


async def say_all(peer: DiscordPeer, rng: random.Random, users: list[str], rooms: list[str]) -> dict[str, dict]:
    """Say MESSAGES numbered messages, ~10 per second; token -> what was said, where, and whether a session was live."""
    asked: dict[str, dict] = {}
    for n in range(MESSAGES):
        token = f"msg-{n:04d}"
        if rng.random() < 0.05:
            peer.fail_next(429, retry_after=0.2)
        asked[token] = await say(peer, token, rng.choice([*users, *rooms]), rooms)
        await asyncio.sleep(rng.uniform(0, 0.2))
    return asked


async def test_every_message_posted_is_answered_exactly_once_across_sigkills(tmp_path):
    seed = crash_seed()
    rng = random.Random(seed)
    token = new_token()
    peer = await DiscordPeer(token=token).start()
    peer.send_latency = SEND_LATENCY_S
    rooms = [await peer.new_channel(f"class-{i}") for i in range(ROOMS)]
    gateway = GatewayProcess(tmp_path, write_config(tmp_path, peer), gateway_env(delta_delay=0.01, DISCORD_TOKEN=token))
    kills: list[float] = []
    try:
        await gateway.start()
        await wait_until(peer.connected, within=HANG_S, what="the gateway never connected", poll=0.1)
        users = [str(10**17 + rng.randrange(10**17)) for _ in range(DMS)]
        warm = {f"msg-9{i:03d}": await say(peer, f"msg-9{i:03d}", where, rooms) for i, where in enumerate([*users, *rooms])}

        def shown() -> set[str]:
            return {t for cid in peer.messages for m in peer.seen(cid) for t in TOKEN_RE.findall(m["content"])}

        await wait_until(lambda: set(warm) <= shown(), within=HANG_S, what="the first message of each chat was not answered")
        said, _ready = await asyncio.gather(
            say_all(peer, rng, users, rooms),
            kill_and_restart(gateway, rng, kills=KILLS, between=(2.0, 3.0), kill_times=kills))
        asked = {**warm, **said}
        ids = {a["id"]: t for t, a in asked.items()}

        async def all_answered() -> bool:
            return set(asked) <= shown() and await gateway.backlog() == 0

        await wait_until(all_answered, within=2 * HANG_S, what="not every posted message was answered", poll=0.25)
        await gateway.stop()
    finally:
        await gateway.stop()
        await peer.stop()

    stored = {ids[e] for e in accepted(tmp_path / "data" / "gateway.db") if e in ids}
    copies: Counter[str] = Counter()
    orphans, misplaced = [], []
    for cid in peer.messages:
        for message in peer.seen(cid):
            tokens = TOKEN_RE.findall(message["content"])
            if not tokens:
                orphans.append(f"{cid}#{message['id']} {message['content']!r}")
            for t in tokens:
                copies[t] += 1
                if asked[t]["channel"] != cid:
                    misplaced.append(f"{t} asked in {asked[t]['channel']}, answered in {cid}")
    offline = sum(1 for a in asked.values() if not a["live"])
    print(f"discord crash test: {len(asked)} said, {len(stored)} accepted, {sum(copies.values())} answers, "
          f"{gateway.starts - 1} SIGKILLs, identifies={peer.identifies} resumes={peer.resumes}, "
          f"429s={peer.rate_limited()}, said with no session connected: {offline}, "
          f"catch-up fetches: {sum(1 for r in peer.requests if r['method'] == 'GET' and r['route'] == 'channels/{id}/messages')}")
    assert gateway.starts - 1 == KILLS
    assert stored, "nothing was accepted"
    assert stored == set(asked), f"posted and never stored: {sorted(set(asked) - stored)[:10]}"
    assert not (missing := sorted(set(asked) - set(copies))), f"posted and never answered: {missing[:10]}"
    assert not (doubled := {t: n for t, n in copies.items() if n > 1}), f"answered more than once: {doubled}"
    assert not orphans, orphans[:5]
    assert not misplaced, misplaced[:5]
