"""Exactly one reply per Matrix message, while the gateway is SIGKILLed and restarted.

A real Synapse (the session's, a separate process that is never killed)
hosts 10 rooms -- 8 direct rooms, 2 groups of three where every message
mentions the bot -- whose learners say 100 numbered messages.  Meanwhile a
real ``partners serve`` process is killed with SIGKILL three times at random
moments and started again each time.  The gateway reaches Synapse through
the fault proxy, which answers about 5 % of sends with 429 and 3 % with a
504 *after* posting (the response is lost, the event is not); replies are
streamed (a preview, then ``m.replace`` edits), so previews and edits are on
the path being killed.

At the end, from the rooms' own timelines only (edits applied): every
message was answered by exactly one bot message; no bot message answers
nothing (no orphaned preview); and in every direct room the answers appear in
the order the questions were asked.  Set ``CRASH_SEED`` to replay a run.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.crash.gateway_process import GatewayProcess
from tests.crash.scenario import crash_seed, gateway_env, kill_and_restart, wait_until
from tests.peers.matrix_client import MatrixUser, shown_messages
from tests.peers.matrix_proxy import MatrixFaultProxy
from tests.waits import HANG_S

MESSAGES, DIRECT, GROUPS, KILLS = 100, 8, 2, 3
TOKEN_RE = re.compile(r"msg-\d{4}")

pytestmark = pytest.mark.slow


def write_config(workdir: Path, homeserver: str, bot) -> Path:
    config = {
        "data_dir": str(workdir / "data"),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "matrix", "account": "main"}],
        "channels": {"matrix": {"main": {
            "homeserver": homeserver, "user_id": bot.user_id, "access_token": "env:MATRIX_TOKEN",
            "device_id": bot.device_id, "sync_timeout_s": 2,
            "access": {"dm": "open", "group": "mention"},
        }}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1, "delivery_max_attempts": 50},
    }
    path = workdir / "partners.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


async def make_rooms(synapse, bot: str, tag: str) -> list[tuple[str, str, list[MatrixUser]]]:
    """(room, kind, speakers): direct rooms with one learner, groups with three (all joined but the bot)."""
    rooms = []
    for number in range(DIRECT + GROUPS):
        group = number >= DIRECT
        speakers = [MatrixUser(synapse.url, synapse.register(f"crash-{tag}-{number}-{n}")) for n in range(3 if group else 1)]
        room = await speakers[0].create_room(invite=[bot, *(s.user_id for s in speakers[1:])], direct=not group)
        for classmate in speakers[1:]:
            await classmate.join(room)
        rooms.append((room, "group" if group else "direct", speakers))
    return rooms


async def say_all(rooms, bot: str, rng: random.Random) -> dict[str, str]:
    """Say MESSAGES numbered messages across the rooms, ~25 per second; return token -> room."""
    asked: dict[str, str] = {}
    for n in range(MESSAGES):
        room, kind, speakers = rng.choice(rooms)
        token = f"msg-{n:04d}"
        if kind == "group":
            await rng.choice(speakers).say(room, f"Tutor: {token}", mentions=[bot])
        else:
            await speakers[0].say(room, token)
        asked[token] = room
        await asyncio.sleep(rng.uniform(0, 0.08))
    return asked


async def test_every_matrix_message_is_answered_exactly_once_across_sigkills(synapse, tmp_path):
    seed = crash_seed()
    rng = random.Random(seed)
    tag = f"{seed}-{rng.randrange(10**6)}"
    bot = synapse.register(f"crash-bot-{tag}")
    proxy = MatrixFaultProxy(synapse.url, seed=seed)
    await proxy.start()
    proxy.rate_429, proxy.rate_lost = 0.05, 0.03
    rooms = await make_rooms(synapse, bot.user_id, tag)
    env = gateway_env(delta_delay=0.01, MATRIX_TOKEN=bot.access_token)
    gateway = GatewayProcess(tmp_path, write_config(tmp_path, proxy.url, bot), env)
    try:
        await gateway.start()
        began = time.monotonic()
        asked, ready_times = await asyncio.gather(
            say_all(rooms, bot.user_id, rng), kill_and_restart(gateway, rng, kills=KILLS, between=(1.0, 2.5)))

        async def shown() -> dict[str, list[dict]]:
            return {room: shown_messages(await speakers[0].events(room), bot.user_id) for room, _, speakers in rooms}

        async def all_answered() -> bool:
            tokens = {t for messages in (await shown()).values() for m in messages
                      for t in TOKEN_RE.findall(m["content"].get("body", ""))}
            return len(tokens) >= len(asked) and await gateway.backlog() == 0

        await wait_until(all_answered, within=2 * HANG_S, what="not every message was answered", poll=0.25)
        elapsed = time.monotonic() - began
        await gateway.stop()
        final = await shown()
    finally:
        await gateway.stop()
        await proxy.stop()
        for _, _, speakers in rooms:
            for speaker in speakers:
                await speaker.aclose()

    answered: Counter[str] = Counter()
    orphans, misplaced, out_of_order = [], [], []
    kinds = {room: kind for room, kind, _ in rooms}
    for room, messages in final.items():
        order = []
        for message in messages:
            tokens = TOKEN_RE.findall(message["content"].get("body", ""))
            if not tokens:
                orphans.append(f"{room} {message['event_id']} {message['content'].get('body')!r}")
            answered.update(tokens)
            order += tokens
            misplaced += [f"{t} asked in {asked[t]}, answered in {room}" for t in tokens if asked[t] != room]
        if kinds[room] == "direct" and order != sorted(order):
            out_of_order.append(f"{room}: {order}")
    missing = sorted(set(asked) - set(answered))
    doubled = sorted(t for t, n in answered.items() if n > 1)
    replies = sum(len(m) for m in final.values())
    edits = sum(m["edits"] for messages in final.values() for m in messages)
    print(
        f"matrix crash test: {len(asked)} messages in {len(rooms)} rooms, {replies} visible replies ({edits} edits), "
        f"{gateway.starts - 1} SIGKILLs, ready after restart {min(ready_times):.2f}-{max(ready_times):.2f} s, "
        f"all answered {elapsed:.1f} s after start\n"
        f"proxy outcomes: {dict(sorted(proxy.outcomes.items()))}\n"
        f"violations: missing={len(missing)} doubled={len(doubled)} orphans={len(orphans)} "
        f"misplaced={len(misplaced)} out_of_order={len(out_of_order)}"
    )
    assert gateway.starts - 1 == KILLS
    assert not missing, f"{len(missing)} messages never answered: {missing[:10]}"
    assert not doubled, f"{len(doubled)} messages answered more than once: {doubled[:10]}"
    assert not orphans, f"{len(orphans)} bot messages answer nothing (orphaned previews?): {orphans[:5]}"
    assert not misplaced, misplaced[:5]
    assert not out_of_order, f"answers out of order: {out_of_order[:3]}"
