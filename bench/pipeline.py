"""Pipeline throughput and added latency on the durable SQLite path.

An in-process Gateway with one account of an in-memory bench channel (its
``send`` records the time) and a zero-latency responder, so what is measured
is the gateway itself: ingest (dedup + inbox commit), dispatch, routing,
access policy, the conversation lane, the outbox commit, rendering, pacing
and the send call.  Latency is from just before ``sink.accept`` (in the
paced run: from the moment the message was due, so a stalled ingest counts
against us) to the moment ``send`` is called for that message's reply.

Two runs:

- **burst**: N messages over C conversations, offered as fast as the ingest
  accepts them (``--producers`` concurrent callers of ``sink.accept``, each
  call carrying ``--batch`` messages, like a poll batch);
- **paced**: messages offered at a fixed rate (default 200 msg/s), to read
  p99 latency well below saturation.

Usage: python bench/pipeline.py [--messages 20000] [--conversations 500]
       [--rate 200] [--paced-seconds 10] [--batch 1] [--producers 8] [--runs 1]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from channels.base import Channel
from gateway.app import Gateway
from gateway.configfile import parse_config
from gateway.core.capabilities import ChannelCapabilities, Dialect, EditMode, TextUnit
from gateway.core.channel import Heartbeat
from gateway.core.config import AccountConfig
from gateway.core.events import RuntimeEvent, StreamEnd, TurnEnd
from gateway.core.messages import (
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    MessageId,
    Referrer,
    RenderedPart,
    Sender,
    SentMessage,
    Text,
    UserId,
)
from gateway.core.turns import Turn

CAPABILITIES = ChannelCapabilities(
    platform="bench", text_limit=4000, text_unit=TextUnit.CHARS, dialect=Dialect.PLAIN,
    elements=frozenset({"text"}), edit_mode=EditMode.NONE,
)
"""Made once, as a real channel's row is read once from platforms.toml (the outbound path asks per send)."""


class BenchChannel(Channel[AccountConfig]):
    """The platform is a dict of timestamps: when each message was offered, when its reply was sent."""

    name = "bench"
    config_model = AccountConfig
    offered: dict[str, float] = {}
    answered: dict[str, float] = {}
    done = asyncio.Event()
    expected = 0

    @classmethod
    def capabilities(cls) -> ChannelCapabilities:
        return CAPABILITIES

    async def run(self, heartbeat: Heartbeat) -> None:
        while True:
            heartbeat.beat()
            await asyncio.sleep(1)

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        now = time.perf_counter()
        for event in part.text.split()[1:]:
            self.answered.setdefault(event, now)
        if len(self.answered) >= self.expected:
            self.done.set()
        return SentMessage(message=MessageId(idempotency_key))

    async def offer(self, batch: list[tuple[str, str]], scheduled: float | None = None) -> None:
        """Accept a batch; latency counts from ``scheduled`` when given (no coordinated omission)."""
        now = datetime.now(UTC)
        messages = [
            InboundMessage(
                event_id=EventId(event),
                address=Address(channel=ChannelName("bench"), account=AccountId(self.account),
                                conversation=Conversation(chat=ChatId(chat), kind=ConversationKind.DIRECT)),
                sender=Sender(user=UserId(chat)),
                elements=(Text(text=event),),
                received_at=now,
                addressed=True,
            )
            for event, chat in batch
        ]
        started = scheduled if scheduled is not None else time.perf_counter()
        for event, _ in batch:
            self.offered[event] = started
        await self.context.sink.accept(messages)


class ZeroLatencyResponder:
    name = "zero-latency"

    async def respond(self, turn: Turn) -> AsyncIterator[RuntimeEvent]:
        yield StreamEnd(markdown="re " + " ".join(m.event_id for m in turn.messages))
        yield TurnEnd()


def config(data_dir: Path, partner: dict | None = None):
    """One bench account bound to ``partner`` (default: a bare tutor), no coalescing wait."""
    partner = partner or {"id": "tutor", "name": "Tutor"}
    return parse_config({
        "data_dir": str(data_dir),
        "partners": [partner],
        "bindings": [{"partner": partner["id"], "channel": "bench", "account": "a"}],
        "channels": {"bench": {"a": {"access": {"dm": "open"}}}},
        "pipeline": {"coalesce_window_s": 0},
    })


async def run(data_dir: Path, schedule: list[tuple[float | None, str, str]], *, batch: int, producers: int) -> dict:
    """Offer ``(at, event, chat)`` items (``at`` None: as fast as possible); return the measurements."""
    BenchChannel.offered, BenchChannel.answered = {}, {}
    BenchChannel.done = asyncio.Event()
    BenchChannel.expected = len(schedule)
    gateway = Gateway(config(data_dir), responder=ZeroLatencyResponder(), channel_classes={"bench": BenchChannel})
    await gateway.start()
    channel = gateway.channel("bench", "a")
    assert isinstance(channel, BenchChannel), gateway.unavailable
    cpu0, t0 = time.process_time(), time.perf_counter()
    queue = iter(range(0, len(schedule), batch))

    async def producer() -> None:
        for start in queue:
            items = schedule[start:start + batch]
            at = items[0][0]
            if at is not None and (delay := t0 + at - time.perf_counter()) > 0:
                await asyncio.sleep(delay)
            await channel.offer([(event, chat) for _, event, chat in items], None if at is None else t0 + at)

    await asyncio.gather(*(producer() for _ in range(producers)))
    await asyncio.wait_for(BenchChannel.done.wait(), 600)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await gateway.stop()
    latencies = sorted(BenchChannel.answered[e] - BenchChannel.offered[e] for e in BenchChannel.offered)
    return {"n": len(latencies), "wall": wall, "cpu": cpu, "lat": latencies}


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def row(label: str, r: dict) -> str:
    lat = r["lat"]
    return (f"{label:<26} {r['n']:>7} {r['wall']:>8.2f} {r['n'] / r['wall']:>9.0f} {1000 * r['cpu'] / r['n']:>9.3f} "
            f"{1000 * pct(lat, 0.5):>8.2f} {1000 * pct(lat, 0.99):>8.2f} {1000 * lat[-1]:>8.2f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--conversations", type=int, default=500)
    parser.add_argument("--rate", type=float, default=200.0, help="offered msg/s in the paced run")
    parser.add_argument("--paced-seconds", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=1, help="messages per sink.accept call")
    parser.add_argument("--producers", type=int, default=8, help="concurrent sink.accept callers in the burst run")
    parser.add_argument("--runs", type=int, default=1, help="repeat each run; the table shows every run")
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite files go (default: a temp dir)")
    args = parser.parse_args()

    chats = [f"c{i}" for i in range(args.conversations)]
    ids = itertools.count()
    header = f"{'run':<26} {'msgs':>7} {'wall s':>8} {'msg/s':>9} {'cpu ms/m':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    print(f"durable SQLite path, zero-latency responder, {args.conversations} conversations, batch {args.batch}")
    print(header)
    print("-" * len(header))
    throughputs, p99s = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            burst = [(None, f"e{next(ids)}", chats[n % len(chats)]) for n in range(args.messages)]
            result = await run(Path(tmp), burst, batch=args.batch, producers=args.producers)
            throughputs.append(result["n"] / result["wall"])
            print(row(f"burst ({args.producers} producers)", result), flush=True)
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            count = int(args.rate * args.paced_seconds)
            paced = [(n / args.rate, f"e{next(ids)}", chats[n % len(chats)]) for n in range(count)]
            result = await run(Path(tmp), paced, batch=1, producers=64)
            p99s.append(1000 * pct(result["lat"], 0.99))
            print(row(f"paced {args.rate:g} msg/s", result), flush=True)
    best, worst = max(throughputs), max(p99s)
    print(f"\ntargets: burst >= 2000 msg/s: {best:.0f} ({'ok' if best >= 2000 else 'MISSED'}); "
          f"p99 at {args.rate:g} msg/s < 20 ms: worst {worst:.1f} ms ({'ok' if worst < 20 else 'MISSED'})")


if __name__ == "__main__":
    asyncio.run(main())
