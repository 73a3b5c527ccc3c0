"""Every accepted message answered exactly once, across SIGKILLs, on Discord.

The Gateway + REST emulator runs in the test's process (never killed); a real
``partners serve`` on the ``discord`` channel is SIGKILLed ``KILLS`` times while
learners in 10 DMs and 3 guild channels (every message mentions the bot) say
``MESSAGES`` numbered messages.  Every send answers ``SEND_LATENCY_S`` after it
was posted, about 5 % are answered 429 first, and the responder streams (two
deltas), so previews edited in place are on the path being killed.

Discord has no per-event acknowledgement and a new process identifies a new
session, so what was dispatched to a killed process and not yet stored is not
delivered again (docs/adr/0027-discord-channel.md).  The checks, from the
emulator's record and the gateway's inbox:

- every message the gateway accepted (its ``inbound`` table) is answered by
  exactly one visible bot message, in its own channel -- sends carry a nonce
  Discord deduplicates, so a send repeated after a kill returns the first;
- no bot message answers nothing (no preview left behind);
- every message dispatched to a live session more than ``UNCONFIRMED_S``
  away from any kill was accepted.

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
UNCONFIRMED_S = 1.5
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


async def say_all(peer: DiscordPeer, rng: random.Random, rooms: list[str]) -> dict[str, dict]:
    """Say MESSAGES numbered messages, ~10 per second; token -> what was said, where, and whether a session was live."""
    users = [str(10**17 + rng.randrange(10**17)) for _ in range(DMS)]
    asked: dict[str, dict] = {}
    for n in range(MESSAGES):
        token = f"msg-{n:04d}"
        if rng.random() < 0.05:
            peer.fail_next(429, retry_after=0.2)
        live = peer.connected()
        where = rng.choice([*users, *rooms])
        if where in rooms:
            message = await peer.say(token, channel=where, mention=True)
        else:
            message = await peer.say(token, user=where)
        asked[token] = {"id": message["id"], "channel": message["channel_id"], "live": live, "at": time.time()}
        await asyncio.sleep(rng.uniform(0, 0.2))
    return asked


async def test_every_accepted_message_is_answered_exactly_once_across_sigkills(tmp_path):
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
        asked, _ready = await asyncio.gather(
            say_all(peer, rng, rooms), kill_and_restart(gateway, rng, kills=KILLS, between=(2.0, 3.0), kill_times=kills))
        ids = {a["id"]: t for t, a in asked.items()}

        async def all_answered() -> bool:
            stored = {ids[e] for e in accepted(tmp_path / "data" / "gateway.db") if e in ids}
            shown = {t for cid in peer.messages for m in peer.seen(cid) for t in TOKEN_RE.findall(m["content"])}
            return stored <= shown and await gateway.backlog() == 0

        await wait_until(all_answered, within=2 * HANG_S, what="not every accepted message was answered", poll=0.25)
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
    lost = [t for t, a in asked.items() if t not in stored and a["live"]
            and not any(-UNCONFIRMED_S <= k - a["at"] <= UNCONFIRMED_S for k in kills)]
    print(f"discord crash test: {len(asked)} said, {len(stored)} accepted, {sum(copies.values())} answers, "
          f"{gateway.starts - 1} SIGKILLs, identifies={peer.identifies} resumes={peer.resumes}, "
          f"429s={peer.rate_limited()}, not delivered to a live session (said while down or at a kill): {len(asked) - len(stored)}")
    assert gateway.starts - 1 == KILLS
    assert stored, "nothing was accepted"
    assert not (missing := sorted(stored - set(copies))), f"accepted and never answered: {missing[:10]}"
    assert not (doubled := {t: n for t, n in copies.items() if n > 1}), f"answered more than once: {doubled}"
    assert not orphans, orphans[:5]
    assert not misplaced, misplaced[:5]
    assert not lost, f"dispatched to a live session well away from any kill and never stored: {lost[:10]}"
