"""Every message answered, across SIGKILLs, on Telegram -- and at most one repeat per kill.

The Bot API emulator (a separate process that is never killed) plays 20 chats
-- 15 private, 5 groups where every message mentions the bot -- that say 200
numbered messages.  Meanwhile a real ``partners serve`` process on the
``telegram`` channel is killed with SIGKILL five times and started again.
The emulator answers about 5 % of sends with 429, 2 % with 503 (nothing
posted) and 2 % with a 504 *after* posting: a lost response.  Every send
answers ``SEND_LATENCY_S`` after its message is posted, as the real Bot API
does a network away, so at any moment several chats have a send on the wire.  The responder
streams (``tests/crash/echo_responder.py``, two deltas), so private-chat
drafts and group previews edited in place are on the path being killed.

Telegram takes no idempotency key (docs/adr/0010-telegram-channel.md), so a
message the platform posted but whose answer never reached the gateway's
durable record cannot be recognised when the gateway sends it again.  The
checks, from the emulator's record and the gateway's outbox:

- nothing missing: every message is answered by a visible bot message;
- a second copy of an answer (or a preview left behind) is allowed only if the
  earlier copy was *unconfirmed*: the gateway's outbox never recorded its id,
  and either its answer was lost (504) or a SIGKILL came within
  ``UNCONFIRMED_S`` of its posting (or the emulator posted it just after the
  kill, from bytes already on the socket);
- at most ``REPEATS_PER_KILL`` such copies per SIGKILL: the one send of the
  account that may be posted and not yet recorded
  (docs/adr/0022-one-unrecorded-send-per-account.md) -- before, every chat with a
  send on the wire at the kill could show its answer twice;
- nothing misplaced;
- in every private chat, answers appear in the order the questions were asked.

Set ``CRASH_SEED`` to replay a run; the seed is printed.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sqlite3
import time
from collections import Counter, defaultdict
from contextlib import closing
from pathlib import Path

import pytest
import yaml

from tests.crash.gateway_process import GatewayProcess
from tests.crash.scenario import crash_seed, gateway_env, kill_and_restart, wait_until
from tests.peers.telegram_peer import TelegramPeer, TelegramUsers
from tests.waits import HANG_S

MESSAGES, CHATS, GROUPS, KILLS = 200, 20, 5, 5
SEND_LATENCY_S = 0.2
"""How long after posting a message the emulator answers the send: a round trip to the Bot API over a slow link."""
REPEATS_PER_KILL = 1
"""The documented bound: one Telegram account, so one unrecorded send at a time."""
UNCONFIRMED_S = 2.0
"""How long after its posting a message's id may still be unrecorded when a SIGKILL lands (ms in practice)."""
AFTER_KILL_S = 0.5
"""How long after the kill was ordered the emulator may still post a send the gateway had already written to the socket."""
TOKEN_RE = re.compile(r"msg-\d{4}")

pytestmark = pytest.mark.slow


def write_config(workdir: Path, api_url: str) -> Path:
    config = {
        "data_dir": str(workdir / "data"),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "telegram", "account": "main"}],
        "channels": {"telegram": {"main": {
            "token": "env:TELEGRAM_TOKEN", "api_url": api_url, "poll_timeout": 2,
            "access": {"dm": "open", "group": "mention"},
        }}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1, "delivery_max_attempts": 50},
    }
    path = workdir / "partners.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def chats_of(seed: int) -> list[dict]:
    base = 10**6 + seed % 10**6
    return [{"id": -(10**12 + base + i), "type": "supergroup", "title": f"Class {i}"} if i < GROUPS
            else {"id": base * 10 + i, "type": "private"} for i in range(CHATS)]


async def say_all(users: TelegramUsers, rng: random.Random, chats: list[dict]) -> dict[str, int]:
    """Say MESSAGES numbered messages, ~30 per second; return token -> chat id."""
    asked: dict[str, int] = {}
    for n in range(MESSAGES):
        chat = rng.choice(chats)
        group = chat["type"] != "private"
        user = {"id": abs(chat["id"]) % 10**9 + rng.randrange(3)} if group else {"id": chat["id"]}
        token = f"msg-{n:04d}"
        await users.say(chat, token, user=user, mention=group)
        asked[token] = chat["id"]
        await asyncio.sleep(rng.uniform(0, 0.065))
    return asked


def recorded_ids(database: Path) -> set[tuple[int, int]]:
    """(chat, message id) of every bot message the gateway's outbox durably knows about."""
    known: set[tuple[int, int]] = set()
    with closing(sqlite3.connect(database)) as db:
        for payload, preview, sent in db.execute("SELECT payload, preview, sent FROM outbox WHERE channel = 'telegram'"):
            chat = int(json.loads(payload)["target"]["conversation"]["chat"])
            ids = json.loads(sent) + ([preview] if preview and not preview.startswith("draft:") else [])
            known.update((chat, int(i)) for i in ids)
    return known


async def test_every_message_is_answered_and_a_sigkill_repeats_at_most_one_send(tmp_path):
    seed = crash_seed()
    rng = random.Random(seed)
    token = f"{1000 + seed % 10**6}:crash{seed}"
    peer = TelegramPeer.start(tmp_path / "telegram-api.log", seed=seed)
    users = TelegramUsers(peer.url, token)
    env = gateway_env(delta_delay=0.01, TELEGRAM_TOKEN=token)
    gateway = GatewayProcess(tmp_path, write_config(tmp_path, peer.url), env)
    kills: list[float] = []
    try:
        await users.register(privacy=True)
        await users.faults(rate_429=0.05, rate_5xx=0.02, rate_lost=0.02, retry_after=0.2, send_latency=SEND_LATENCY_S)
        await gateway.start()
        began = time.monotonic()
        asked, ready = await asyncio.gather(
            say_all(users, rng, chats_of(seed)), kill_and_restart(gateway, rng, kills=KILLS, between=(1.0, 2.0), kill_times=kills))

        async def all_answered() -> bool:
            shown = {t for messages in (await users.seen()).values() for m in messages for t in TOKEN_RE.findall(m["text"])}
            return len(shown) >= len(asked) and await gateway.backlog() == 0

        await wait_until(all_answered, within=2 * HANG_S, what="not every message was answered", poll=0.25)
        elapsed = time.monotonic() - began
        await gateway.stop()
        seen, attempts = await users.seen(), (await users.attempts())["attempts"]
    finally:
        await gateway.stop()
        await users.aclose()
        peer.stop()

    known = recorded_ids(tmp_path / "data" / "gateway.db")
    posted = {(int(a["chat_id"]), a["message_id"]): a for a in attempts if "message_id" in a}

    by_kill: Counter[int] = Counter()
    """How many unrecorded copies each SIGKILL left behind (by its index in ``kills``)."""

    def unconfirmed(chat: int, message: dict) -> str | None:
        """Why this copy could not be known to the gateway, or None if it should have been."""
        if (chat, message["message_id"]) in known:
            return None
        attempt = posted[(chat, message["message_id"])]
        if attempt["outcome"] == "posted+lost_response":
            return "lost response"
        killed = [i for i, k in enumerate(kills) if -AFTER_KILL_S <= k - attempt["at"] <= UNCONFIRMED_S]
        if killed:
            by_kill[killed[0]] += 1
            return "SIGKILL before it was recorded"
        return None

    answers: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    excused: Counter[str] = Counter()
    orphans, misplaced, out_of_order = [], [], []
    for chat_key, messages in seen.items():
        chat = int(chat_key)
        for message in messages:
            tokens = TOKEN_RE.findall(message["text"])
            if not tokens:
                why = unconfirmed(chat, message)
                if why is None:
                    orphans.append(f"{chat}#{message['message_id']} {message['text']!r}")
                excused[f"orphaned preview ({why})"] += why is not None
            for t in tokens:
                answers[t].append((chat, message))
            misplaced += [f"{t} asked in {asked[t]}, answered in {chat}" for t in tokens if asked[t] != chat]
        if chat > 0:
            firsts: list[str] = []
            for message in sorted(messages, key=lambda m: m["message_id"]):
                firsts += [t for t in TOKEN_RE.findall(message["text"]) if t not in firsts]
            if firsts != sorted(firsts):
                out_of_order.append(f"{chat}: {firsts}")
    missing = sorted(set(asked) - set(answers))
    repeated: dict[tuple[int, int], tuple[str, dict]] = {}
    for t, copies in answers.items():
        *earlier, _last = sorted(copies, key=lambda c: c[1]["message_id"])
        for chat, message in earlier:
            repeated[(chat, message["message_id"])] = (t, message)
    doubled = []
    for (chat, number), (t, message) in sorted(repeated.items()):
        why = unconfirmed(chat, message)
        if why is None:
            doubled.append(f"{t}: {chat}#{number} was recorded by the gateway or confirmed, and still sent again")
        else:
            excused[f"repeated answer ({why})"] += 1

    outcomes = Counter(a.get("outcome") for a in attempts)
    replies = sum(len(m) for m in seen.values())
    print(
        f"telegram crash test: {len(asked)} messages, {replies} visible bot messages, {gateway.starts - 1} SIGKILLs, "
        f"ready after restart {min(ready):.2f}-{max(ready):.2f} s, all answered {elapsed:.1f} s after start\n"
        f"send attempts by outcome: {dict(sorted(outcomes.items()))}\n"
        f"unavoidable on Telegram (no idempotency key): {dict(excused) or 'none'}\n"
        f"unrecorded copies per SIGKILL: {[by_kill[i] for i in range(len(kills))]}\n"
        f"violations: missing={len(missing)} doubled={len(doubled)} orphans={len(orphans)} "
        f"misplaced={len(misplaced)} out_of_order={len(out_of_order)}"
    )
    assert gateway.starts - 1 == KILLS
    assert not missing, f"{len(missing)} messages never answered: {missing[:10]}"
    assert all(n <= REPEATS_PER_KILL for n in by_kill.values()), (
        f"a SIGKILL repeated more than {REPEATS_PER_KILL} send(s): {dict(by_kill)} (kills at {kills})")
    for line in doubled[:3]:  # what the platform shows in that chat, with how each send went
        chat = int(line.split(": ")[1].split("#")[0])
        print(f"doubled {line}; SIGKILLs at {kills}")
        for m in seen[str(chat)]:
            a = posted.get((chat, m["message_id"]), {})
            print(f"    #{m['message_id']} {m['text'][:60]!r} {a.get('outcome')} at {a.get('at')}")
    assert not doubled, doubled[:5]
    assert not orphans, f"{len(orphans)} bot messages answer nothing and were not unconfirmed sends: {orphans[:5]}"
    assert not misplaced, misplaced[:5]
    assert not out_of_order, f"answers out of order: {out_of_order[:3]}"
    lost = sum(n for why, n in excused.items() if "lost response" in why)
    assert lost <= outcomes["posted+lost_response"]
