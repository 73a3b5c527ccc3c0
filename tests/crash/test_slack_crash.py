"""Every message answered, across SIGKILLs, on Slack -- and at most one repeat per kill.

The Slack emulator (its own process, never killed) plays 12 conversations --
8 DMs, 4 channels where every message mentions the bot -- that say 150
numbered messages.  Meanwhile a real ``partners serve`` process on the
``slack`` channel, in Socket Mode, is killed with SIGKILL four times and
started again.  Envelopes the killed process never acked are redelivered by
the emulator to the next connection (with ``retry_attempt``), as Slack does.
The emulator answers about 5 % of sends with 429, 2 % with 503 (nothing
posted) and 2 % with a 504 *after* posting; every send answers
``SEND_LATENCY_S`` after it posted.  The responder streams (two deltas), so
native streams in the channels' threads and edited previews in the DMs are on
the path being killed.

Slack takes no idempotency key, so a message Slack posted whose answer never
reached the gateway's durable record cannot be recognised when the gateway
sends it again (ADR 0022 bounds that to one send per account).  The checks,
from the emulator's record:

- nothing missing: every message is answered by a visible bot message;
- nothing misplaced: an answer shows in the conversation it was asked in;
- the bot messages beyond one per answer (a second copy, a preview left
  behind) number at most one per SIGKILL plus one per lost response.  They
  are counted in messages, not in the numbered messages they answer: the
  gateway coalesces a burst into one answer, and a copy of an answer to four
  numbers is one message too many, not four.  An answer is a set of numbers;
  every bot message beyond one per distinct set, and every one that shows no
  number (a preview or stream opened before the kill), is an extra.

Set ``CRASH_SEED`` to replay a run; the seed is printed.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.crash.gateway_process import GatewayProcess
from tests.crash.scenario import crash_seed, gateway_env, kill_and_restart, wait_until
from tests.peers.slack_peer import SlackPeer, SlackUsers
from tests.waits import HANG_S

MESSAGES, CHATS, GROUPS, KILLS = 150, 12, 4, 4
SEND_LATENCY_S = 0.1
REPEATS_PER_KILL = 1
TOKEN_RE = re.compile(r"msg-\d{4}")

pytestmark = pytest.mark.slow


def write_config(workdir: Path, api_base: str) -> Path:
    config = {
        "data_dir": str(workdir / "data"),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "slack", "account": "school"}],
        "channels": {"slack": {"school": {
            "bot_token": "env:SLACK_BOT_TOKEN", "app_token": "env:SLACK_APP_TOKEN", "api_base": api_base,
            "socket_grace_s": 2, "access": {"dm": "open", "group": "mention"},
        }}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1, "delivery_max_attempts": 50},
    }
    path = workdir / "partners.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


async def say_all(users: SlackUsers, rng: random.Random) -> dict[str, str]:
    """Say MESSAGES numbered messages, ~25 per second; return token -> channel."""
    chats = [f"C{i:06d}" if i < GROUPS else f"D{i:06d}" for i in range(CHATS)]
    asked: dict[str, str] = {}
    for n in range(MESSAGES):
        chat = rng.choice(chats)
        token = f"msg-{n:04d}"
        user = f"U{chat[1:]}{rng.randrange(3) if chat.startswith('C') else 0}"
        await users.say(chat, token, user=user, mention=chat.startswith("C"))
        asked[token] = chat
        await asyncio.sleep(rng.uniform(0, 0.08))
    return asked


async def test_every_message_is_answered_and_a_sigkill_repeats_at_most_one_send(tmp_path):
    seed = crash_seed()
    rng = random.Random(seed)
    peer = SlackPeer.start(tmp_path / "slack-api.log", seed=seed)
    users = SlackUsers(peer.url)
    users.token, users.app_token = f"xoxb-crash-{seed}-{uuid.uuid4().hex[:6]}", f"xapp-crash-{seed}"
    env = gateway_env(delta_delay=0.01, SLACK_BOT_TOKEN=users.token, SLACK_APP_TOKEN=users.app_token)
    gateway = GatewayProcess(tmp_path, write_config(tmp_path, peer.api_base), env)
    kills: list[float] = []
    try:
        await users.register()
        await users.settings(ack_timeout=2.0)
        await users.faults(rate_429=0.05, rate_5xx=0.02, rate_lost=0.02, retry_after=0.2, send_latency=SEND_LATENCY_S)
        await gateway.start()
        began = time.monotonic()
        asked, ready = await asyncio.gather(
            say_all(users, rng), kill_and_restart(gateway, rng, kills=KILLS, between=(1.0, 2.0), kill_times=kills))

        async def all_answered() -> bool:
            shown = {t for messages in (await users.seen()).values() for m in messages for t in TOKEN_RE.findall(m["text"])}
            return len(shown) >= len(asked) and await gateway.backlog() == 0

        await wait_until(all_answered, within=2 * HANG_S, what="not every message was answered", poll=0.25)
        elapsed = time.monotonic() - began
        await gateway.stop()
        seen, calls = await users.seen(), (await users.app())["calls"]
    finally:
        await gateway.stop()
        await users.aclose()
        peer.stop()

    answered: Counter[str] = Counter()
    misplaced = []
    for chat, messages in seen.items():
        for message in messages:
            for token in set(TOKEN_RE.findall(message["text"])):
                answered[token] += 1
                if asked[token] != chat:
                    misplaced.append(f"{token} asked in {asked[token]}, answered in {chat}")
    replies = sum(len(m) for m in seen.values())
    answers = {frozenset(TOKEN_RE.findall(m["text"])) for ms in seen.values() for m in ms} - {frozenset()}
    extra = replies - len(answers)
    lost = sum(1 for c in calls if c["outcome"] == "lost")
    outcomes = Counter(c["outcome"] for c in calls if c["method"] in ("chat.postMessage", "chat.startStream"))
    missing = sorted(set(asked) - set(answered))
    print(f"slack crash test (seed {seed}): {len(asked)} messages, {replies} visible bot messages, "
          f"{gateway.starts - 1} SIGKILLs, ready after restart {min(ready):.2f}-{max(ready):.2f} s, "
          f"all answered {elapsed:.1f} s after start; sends by outcome {dict(outcomes)}; "
          f"extra bot messages {extra} (allowed {KILLS * REPEATS_PER_KILL} + {lost} lost responses)")
    assert gateway.starts - 1 == KILLS
    assert not missing, f"{len(missing)} messages never answered: {missing[:10]}"
    assert not misplaced, misplaced[:5]
    if extra > KILLS * REPEATS_PER_KILL + lost:
        print(explain_extra(seen, calls, answered))
    assert extra <= KILLS * REPEATS_PER_KILL + lost, f"{extra} bot messages beyond one per answer"


def explain_extra(seen: dict[str, list[dict]], calls: list[dict], answered: Counter[str]) -> str:
    """Every bot message of an answer shown more than once, with the calls that touched it: what a failure needs."""
    lines = ["bot messages of answers shown more than once:"]
    for token in sorted(t for t, n in answered.items() if n > 1):
        for chat, messages in seen.items():
            for message in messages:
                if token not in message["text"]:
                    continue
                touched = [f"{c['method']}:{c['outcome']}" for c in calls if c["params"].get("ts") == message["ts"]
                           or (c["params"].get("channel") == chat and token in str(c["params"].get("text")))]
                lines.append(f"  {token} {chat} ts={message['ts']} thread={message.get('thread_ts')} "
                             f"streaming={message.get('streaming')} edits={message.get('edits')} "
                             f"text={message['text'][:60]!r} calls={touched}")
    lines.append("bot messages that show no answer (a preview left behind):")
    for chat, messages in seen.items():
        for message in messages:
            if not TOKEN_RE.search(message["text"]):
                touched = [f"{c['method']}:{c['outcome']}" for c in calls if c["params"].get("ts") == message["ts"]]
                lines.append(f"  {chat} ts={message['ts']} thread={message.get('thread_ts')} streaming={message.get('streaming')} "
                             f"edits={message.get('edits')} text={message['text'][:60]!r} calls={touched}")
    return "\n".join(lines)
