"""Exactly one reply per inbound message, while the gateway is SIGKILLed and restarted.

The relay platform (a separate process that is never killed) plays 40 chats
-- 30 direct, 10 groups where every message mentions the bot -- that say 400
numbered messages.  Meanwhile a real ``partners serve`` process is killed with
SIGKILL at random moments, five times, and started again each time.  The
platform answers about 5 % of sends with 429, 2 % with 503, and 2 % with a 504
*after* posting (the response is lost, the message is not).

At the end, from the platform's own record only: every message was answered,
by exactly one visible bot message; no bot message answers nothing (no
apology, no orphaned preview); and in every direct chat the answers appear in
the order the questions were asked.

The responder is ``tests/crash/echo_responder.py``, loaded through
``PARTNERS_RESPONDER``: zero latency and final text only (``final-only``), or
streamed in two deltas 10 ms apart (``streamed-previews``) so previews and
their edits are on the path being killed.  Set ``CRASH_SEED`` to replay a run;
the seed is printed.
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
from tests.peers.relay_platform import RelayClient, RelayPeer
from tests.waits import HANG_S

MESSAGES, CHATS, GROUPS, KILLS = 400, 40, 10, 5
TOKEN_RE = re.compile(r"msg-\d{4}")

pytestmark = pytest.mark.slow


def write_config(workdir: Path, peer_url: str) -> Path:
    config = {
        "data_dir": str(workdir / "data"),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "relay", "account": "main"}],
        "channels": {"relay": {"main": {
            "base_url": peer_url, "token": "env:RELAY_TOKEN", "poll_timeout": 2,
            "access": {"dm": "open", "group": "mention"},
        }}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1, "delivery_max_attempts": 50},
    }
    path = workdir / "partners.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


async def inject_all(client: RelayClient, rng: random.Random) -> dict[str, str]:
    """Say MESSAGES numbered messages across CHATS chats, ~30 per second; return token -> chat."""
    chats = [(f"g{i}", "group") if i < GROUPS else (f"d{i}", "direct") for i in range(CHATS)]
    asked: dict[str, str] = {}
    for n in range(MESSAGES):
        chat, kind = rng.choice(chats)
        user = f"{chat}-u{rng.randrange(3)}" if kind == "group" else f"{chat}-user"
        token = f"msg-{n:04d}"
        await client.inject(chat, user, token, kind=kind, mention=kind == "group")
        asked[token] = chat
        await asyncio.sleep(rng.uniform(0, 0.065))
    return asked


@pytest.mark.parametrize("delta_delay", [0.0, 0.01], ids=["final-only", "streamed-previews"])
async def test_every_message_is_answered_exactly_once_across_sigkills(tmp_path, delta_delay):
    seed = crash_seed()
    rng = random.Random(seed)
    token = f"crash-{seed}"
    peer = RelayPeer.start(tmp_path / "relay.json", seed=seed)
    client = RelayClient(peer.url, token)
    env = gateway_env(delta_delay=delta_delay, plugins=True, RELAY_TOKEN=token)
    gateway = GatewayProcess(tmp_path, write_config(tmp_path, peer.url), env)
    try:
        await client.register()
        await client.faults(rate_429=0.05, rate_5xx=0.02, rate_lost=0.02, retry_after=0.2)
        await gateway.start()
        began = time.monotonic()
        asked, ready_times = await asyncio.gather(inject_all(client, rng), kill_and_restart(gateway, rng, kills=KILLS, between=(1.0, 3.0)))

        async def all_answered() -> bool:
            shown = {t for messages in (await client.sent()).values() for m in messages for t in TOKEN_RE.findall(m["text"])}
            return len(shown) >= len(asked) and await gateway.backlog() == 0

        await wait_until(all_answered, within=2 * HANG_S, what="not every message was answered", poll=0.25)
        elapsed = time.monotonic() - began
        await gateway.stop()  # graceful: whatever was still in flight is finished or left durable

        sent = await client.sent()
        attempts = await client.attempts()
    finally:
        await gateway.stop()
        await client.aclose()
        peer.stop()

    answered: Counter[str] = Counter()
    orphans, misplaced, out_of_order = [], [], []
    for chat, messages in sent.items():
        for message in messages:
            tokens = TOKEN_RE.findall(message["text"])
            if not tokens:
                orphans.append(f"{chat}#{message['message_id']} {message['text']!r} ({message['client_msg_id']})")
            answered.update(tokens)
            misplaced += [f"{t} asked in {asked[t]}, answered in {chat}" for t in tokens if asked[t] != chat]
        if chat.startswith("d"):
            order = [t for m in sorted(messages, key=lambda m: m["message_id"]) for t in TOKEN_RE.findall(m["text"])]
            if order != sorted(order):
                out_of_order.append(f"{chat}: {order}")
    missing = sorted(set(asked) - set(answered))
    doubled = sorted(t for t, n in answered.items() if n > 1)

    summary = attempts["summary"]
    collapsed = summary.get("duplicate", 0) + summary.get("duplicate+lost_response", 0)
    replies = sum(len(m) for m in sent.values())
    print(
        f"crash test ({'streamed previews' if delta_delay else 'final only'}): {len(asked)} messages, "
        f"{replies} visible replies, {gateway.starts - 1} SIGKILLs, ready after restart "
        f"{min(ready_times):.2f}-{max(ready_times):.2f} s, all answered {elapsed:.1f} s after start\n"
        f"send attempts by outcome: {dict(sorted(summary.items()))}\n"
        f"raw duplicate sends collapsed by client_msg_id: {collapsed}\n"
        f"violations: missing={len(missing)} doubled={len(doubled)} orphans={len(orphans)} "
        f"misplaced={len(misplaced)} out_of_order={len(out_of_order)}"
    )
    assert gateway.starts - 1 == KILLS
    assert not missing, f"{len(missing)} messages never answered: {missing[:10]}"
    assert not doubled, f"{len(doubled)} messages answered more than once: {doubled[:10]}"
    assert not orphans, f"{len(orphans)} bot messages answer nothing (orphaned previews?): {orphans[:5]}"
    assert not misplaced, misplaced[:5]
    assert not out_of_order, f"answers out of order: {out_of_order[:3]}"
