"""The whole turn as a learner runs it: channel -> durable ingest -> lane -> the real brain -> outbox -> send.

An in-process ``Gateway`` with one account of the in-memory bench channel
(``bench/pipeline.py``'s ``BenchChannel``; here its ``send`` also counts the
replies that name each message) and the brain the gateway builds for itself
(``brain.factory.build_brain``: the study-buddy persona, its tools, memory,
the SQLite session log and usage ledger), except that the one model client
the factory makes is ``bench/brain.py``'s zero-latency ``InstantModel``.  The
model answers every round at once with ``re <ids> `` and a ~400-character
answer streamed in 4-character pieces (made once, so the fake's own cost in
the CPU figure is two small objects a round), where ``<ids>`` are the message
ids in the turn's own trailing user messages; so every reply names the
messages it answers, and a missing or doubled answer is seen.  The coalescing window is 0
(its default 0.6 s is a deliberate wait that would be all the latency).

Workloads (``--workloads``, all by default), each on a fresh gateway and data
dir, after three warm-up turns:

- **burst**: ``--messages`` (2,000) over ``--chats`` (100), offered as fast as
  ingest takes them (8 concurrent callers of ``sink.accept``, one message each);
- **closed**: one message in flight per chat: each of ``--chats`` learners
  sends, waits for the reply, sends again, for ``--seconds`` (10);
- **paced**: each rate in ``--rate`` (200,20 msg/s) for ``--seconds``; latency
  counts from when the message was due, so a stalled ingest counts against us.

Latency runs from just before ``sink.accept`` to the ``send`` of the first
reply that names the message.  The counters span the same window (first offer
to last reply):

- CPU: ``resource.getrusage(RUSAGE_SELF)`` user+sys, every thread;
- peak RSS: ``ru_maxrss``, the process's peak so far (it only grows, so later
  workloads show at least the earlier ones' peak);
- writes: ``/proc/self/io`` ``syscw`` (write syscalls) and ``wchar`` (bytes
  handed to them, page cache or disk alike), the whole process;
- commits: every ``sqlite3.connect`` the gateway and brain make goes through a
  wrapper that sets a trace callback on the connection.  A commit is counted
  for a ``COMMIT``/``END`` whose transaction changed rows
  (``total_changes`` moved since its ``BEGIN``), and for each statement run
  outside a transaction (the stores are in autocommit) that changed rows --
  each of those is a transaction of its own.  Read-only transactions are not
  commits.  They are also counted by file name, printed under the table.  The
  callback costs a few microseconds per statement, which the CPU figure includes;
- fsyncs: only with ``--syscalls``.  The script then runs itself in a child
  under ``strace -f --seccomp-bpf -e trace=fsync,fdatasync,chdir`` (only
  those syscalls stop the child); at the start and end of each window the
  child ``chdir``\\s to a path that does not exist and names the window, and
  the parent counts the fsync and fdatasync calls between each pair of marks.
  CPU and latency are then slightly worse than without.

Usage: python bench/full_turn.py [--workloads burst,closed,paced] [--messages 2000]
       [--chats 100] [--seconds 10] [--rate 200,20] [--dir DIR] [--syscalls]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brain import ANSWER, PARTNER, PERSONA_HEAD, InstantModel, answer_round
from bench.pipeline import BenchChannel, config, pct
from brain import factory
from brain.types import ModelRequest, ModelResult, TextDelta, Usage
from gateway.app import Gateway
from gateway.core.messages import Address, MessageId, Referrer, RenderedPart, SentMessage

EVENT = re.compile(r"\bm\d{7}\b")
"""Message ids are ``m`` and seven digits, so a reply's ids are found in its text."""
MARK = "/full-turn-mark"
"""The chdir target prefix that marks a window for strace (no such directory exists)."""
PRODUCERS = 8
WARM_UP = 3


# --------------------------------------------------------------------------- the model and the channel


@dataclass
class EchoModel(InstantModel):
    """The instant model, answering each round with the ids of the turn's own messages, then the answer."""

    def stream(self, request: ModelRequest):  # type: ignore[no-untyped-def]
        if request.messages[0].content.startswith(PERSONA_HEAD):
            self.rounds.append(echo_round(request))
        return super().stream(request)


def echo_round(request: ModelRequest) -> list[TextDelta | ModelResult]:
    ids: list[str] = []
    for message in reversed(request.messages):
        if message.role in ("assistant", "tool"):
            break
        if message.role == "user":
            ids[:0] = EVENT.findall(message.content)
    head = f"re {' '.join(ids)} "
    return [TextDelta(text=head), *ANSWER_PIECES, ModelResult(text=head + ANSWER, usage=USAGE)]


ANSWER_PIECES = tuple(item for item in answer_round() if isinstance(item, TextDelta))
"""The answer's deltas, made once: the fake model's own cost per round is then two small objects."""
USAGE = Usage(prompt_tokens=40, completion_tokens=20)


class TurnChannel(BenchChannel):
    """The bench channel that also counts, per message, how many replies named it."""

    replies: dict[str, int] = {}
    sends = 0
    waiters: dict[str, asyncio.Future[None]] = {}

    @classmethod
    def reset(cls) -> None:
        cls.offered, cls.answered, cls.replies, cls.waiters = {}, {}, {}, {}
        cls.sends, cls.expected, cls.done = 0, 1 << 62, asyncio.Event()

    async def send(self, target: Address, part: RenderedPart, *, referrer: Referrer, idempotency_key: str) -> SentMessage:
        now = time.perf_counter()
        named = EVENT.findall(part.text)
        TurnChannel.sends += bool(named)
        for event in named:
            self.answered.setdefault(event, now)
            self.replies[event] = self.replies.get(event, 0) + 1
            waiter = self.waiters.pop(event, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)
        if len(self.answered) >= self.expected:
            self.done.set()
        return SentMessage(message=MessageId(idempotency_key))

    async def drained(self, timeout: float) -> None:
        """Wait until every offered message has a reply (or ``timeout``: the check then names what is missing)."""
        type(self).expected = len(self.offered)
        if len(self.answered) >= self.expected:
            return
        try:
            await asyncio.wait_for(self.done.wait(), timeout)
        except TimeoutError:
            pass


# --------------------------------------------------------------------------- counters


@dataclass
class Commits:
    """Write transactions on every SQLite connection opened while :meth:`install` is in force."""

    count: int = 0
    by_file: dict[str, int] = field(default_factory=dict)
    """The same commits by the file's name (``gateway.db``, ``brain.db``, ...): which store to look at."""
    pending: list[Callable[[], None]] = field(default_factory=list)

    def install(self) -> mock._patch:  # type: ignore[type-arg]
        original = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = original(*args, **kwargs)
            self.watch(conn, Path(str(args[0] if args else kwargs["database"])).name)
            return conn

        return mock.patch.object(sqlite3, "connect", connect)

    def watch(self, conn: sqlite3.Connection, file: str) -> None:
        state = {"in_tx": False, "since": 0, "loose": -1}

        def counted() -> None:
            self.count += 1
            self.by_file[file] = self.by_file.get(file, 0) + 1

        def settle() -> None:  # a statement outside a transaction that changed rows committed alone
            if state["loose"] >= 0 and conn.total_changes > state["loose"]:
                counted()
            state["loose"] = -1

        def statement(sql: str) -> None:
            head = sql.lstrip()[:8].upper()
            if head.startswith("--"):  # a trigger's own statement
                return
            settle()
            if head.startswith("BEGIN"):
                state["in_tx"], state["since"] = True, conn.total_changes
            elif head.startswith(("COMMIT", "END")):
                if conn.total_changes > state["since"]:
                    counted()
                state["in_tx"] = False
            elif head.startswith("ROLLBACK"):
                state["in_tx"] = False
            elif not state["in_tx"]:
                state["loose"] = conn.total_changes

        conn.set_trace_callback(statement)
        self.pending.append(settle)

    def now(self) -> int:
        for settle in self.pending:
            try:
                settle()
            except sqlite3.ProgrammingError:  # closed
                pass
        return self.count


@dataclass(frozen=True)
class Sample:
    cpu: float
    wall: float
    commits: int
    by_file: dict[str, int]
    syscw: int
    wchar: int

    @classmethod
    def take(cls, commits: Commits) -> Sample:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        io = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
        return cls(usage.ru_utime + usage.ru_stime, time.perf_counter(), commits.now(), dict(commits.by_file),
                   int(io["syscw"]), int(io["wchar"]))


def mark(edge: str, name: str) -> None:
    try:
        os.chdir(f"{MARK}/{edge}/{name}")
    except OSError:
        pass


@dataclass
class Result:
    name: str
    messages: int
    answered: int
    replies: int
    wall: float
    cpu: float
    rss_kb: int
    commits: int
    commits_by_file: dict[str, int]
    syscw: int
    wchar: int
    latencies: list[float]
    problems: list[str]
    fsyncs: int | None = None


# --------------------------------------------------------------------------- the workloads


Drive = Callable[[TurnChannel, Iterator[str]], Any]


def burst(messages: int, chats: list[str]) -> Drive:
    async def drive(channel: TurnChannel, ids: Iterator[str]) -> None:
        queue = iter([(next(ids), chats[n % len(chats)]) for n in range(messages)])

        async def producer() -> None:
            for item in queue:
                await channel.offer([item])

        await asyncio.gather(*(producer() for _ in range(PRODUCERS)))

    return drive


def closed(seconds: float, chats: list[str]) -> Drive:
    async def drive(channel: TurnChannel, ids: Iterator[str]) -> None:
        end = time.perf_counter() + seconds

        async def learner(chat: str) -> None:
            while time.perf_counter() < end:
                event = next(ids)
                waiter = channel.waiters[event] = asyncio.get_running_loop().create_future()
                await channel.offer([(event, chat)])
                try:
                    await asyncio.wait_for(waiter, 60)
                except TimeoutError:
                    return

        await asyncio.gather(*(learner(chat) for chat in chats))

    return drive


def paced(rate: float, seconds: float, chats: list[str]) -> Drive:
    async def drive(channel: TurnChannel, ids: Iterator[str]) -> None:
        t0, offers = time.perf_counter(), set()
        for n in range(int(rate * seconds)):
            due = t0 + n / rate
            if (delay := due - time.perf_counter()) > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(channel.offer([(next(ids), chats[n % len(chats)])], due))
            offers.add(task)
            task.add_done_callback(offers.discard)
        await asyncio.gather(*offers)

    return drive


async def run(name: str, drive: Drive, data_dir: Path, commits: Commits, ids: Iterator[str]) -> Result:
    TurnChannel.reset()
    model = EchoModel()
    with mock.patch.object(factory, "LitellmClient", lambda *_args, **_options: model):
        gateway = Gateway(config(data_dir, PARTNER.model_dump(mode="json")), channel_classes={"bench": TurnChannel})
    await gateway.start()
    try:
        channel = gateway.channel("bench", "a")
        assert isinstance(channel, TurnChannel), gateway.unavailable
        for number in range(WARM_UP):
            await channel.offer([(next(ids), f"warm-up-{number}")])
        await channel.drained(60)
        TurnChannel.reset()
        mark("start", name)
        before = Sample.take(commits)
        await drive(channel, ids)
        await channel.drained(120)
        after = Sample.take(commits)
        mark("end", name)
        await asyncio.sleep(0.5)  # a doubled reply would come now
    finally:
        await gateway.stop()
    offered, counts = TurnChannel.offered, TurnChannel.replies
    missing = [e for e in offered if e not in counts]
    doubled = [e for e, n in counts.items() if n > 1]
    strangers = [e for e in counts if e not in offered]
    problems = [f"{len(found)} {what} (e.g. {', '.join(found[:3])})"
                for what, found in (("unanswered", missing), ("answered twice or more", doubled),
                                    ("replies to messages never offered", strangers)) if found]
    latencies = sorted(TurnChannel.answered[e] - offered[e] for e in offered if e in TurnChannel.answered)
    return Result(
        name=name, messages=len(offered), answered=len(offered) - len(missing), replies=TurnChannel.sends,
        wall=after.wall - before.wall, cpu=after.cpu - before.cpu,
        rss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, commits=after.commits - before.commits,
        commits_by_file={f: n - before.by_file.get(f, 0) for f, n in after.by_file.items() if n > before.by_file.get(f, 0)},
        syscw=after.syscw - before.syscw, wchar=after.wchar - before.wchar, latencies=latencies, problems=problems,
    )


def workloads(args: argparse.Namespace) -> list[tuple[str, Drive]]:
    chats = [f"c{i}" for i in range(args.chats)]
    chosen = args.workloads.split(",")
    unknown = set(chosen) - {"burst", "closed", "paced"}
    if unknown:
        raise SystemExit(f"unknown workloads: {', '.join(sorted(unknown))} (choose from burst, closed, paced)")
    found: list[tuple[str, Drive]] = []
    if "burst" in chosen:
        found.append((f"burst {args.messages}", burst(args.messages, chats)))
    if "closed" in chosen:
        found.append((f"closed loop {args.seconds:g} s", closed(args.seconds, chats)))
    if "paced" in chosen:
        found += [(f"{rate:g} msg/s {args.seconds:g} s", paced(rate, args.seconds, chats)) for rate in args.rate]
    return found


async def measure(args: argparse.Namespace) -> list[Result]:
    commits = Commits()
    ids = (f"m{n:07d}" for n in itertools.count())
    results = []
    with commits.install():
        for name, drive in workloads(args):
            with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
                results.append(await run(name, drive, Path(tmp), commits, ids))
            print(f"  ran {name}", file=sys.stderr, flush=True)
    return results


# --------------------------------------------------------------------------- under strace


def fsyncs_by_window(log: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    window = None
    for line in log.read_text().splitlines():
        if f'chdir("{MARK}/' in line:
            edge, name = line.split(f"{MARK}/", 1)[1].split('"', 1)[0].split("/", 1)
            window = name if edge == "start" else None
        elif window is not None and re.search(r"\b(fsync|fdatasync)\(", line):
            counts[window] = counts.get(window, 0) + 1
    return counts


def under_strace(argv: list[str]) -> list[Result]:
    with tempfile.TemporaryDirectory() as tmp:
        log, out = Path(tmp) / "strace.log", Path(tmp) / "results.json"
        child = [sys.executable, __file__, *[a for a in argv if a != "--syscalls"], "--results", str(out)]
        subprocess.run(["/usr/bin/strace", "-f", "-qq", "--seccomp-bpf", "-e", "trace=fsync,fdatasync,chdir",
                        "-o", str(log), *child], check=True)
        fsyncs = fsyncs_by_window(log)
        results = [Result(**r) for r in json.loads(out.read_text())]
    for result in results:
        result.fsyncs = fsyncs.get(result.name, 0)
    return results


# --------------------------------------------------------------------------- the table


def table(results: list[Result]) -> None:
    header = (f"{'workload':<20} {'answered':>8} {'reply/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>8} "
              f"{'cpu/msg':>8} {'cpu/rep':>8} {'rss MB':>7} {'commit/m':>8} {'wr/m':>6} {'KB/m':>6} {'fsync/m':>7}")
    print(header)
    print("-" * len(header))
    for r in results:
        lat = [1000 * v for v in r.latencies] or [float("nan")]
        per = max(1, r.messages)
        fsync = f"{r.fsyncs / per:>7.2f}" if r.fsyncs is not None else f"{'-':>7}"
        print(f"{r.name:<20} {r.answered:>8} {r.replies / r.wall:>8.0f} {pct(lat, 0.5):>7.2f} {pct(lat, 0.99):>7.2f} "
              f"{lat[-1]:>8.1f} {1000 * r.cpu / per:>8.2f} {1000 * r.cpu / max(1, r.replies):>8.2f} "
              f"{r.rss_kb / 1024:>7.0f} {r.commits / per:>8.2f} {r.syscw / per:>6.1f} {r.wchar / per / 1024:>6.1f} {fsync}")
    print("(cpu ms per message and per reply; wr/m: write syscalls per message; KB/m: bytes written per message)")
    print()
    for r in results:
        verdict = "every message answered exactly once" if not r.problems else "FAILED: " + "; ".join(r.problems)
        files = ", ".join(f"{f} {n / max(1, r.messages):.2f}" for f, n in sorted(r.commits_by_file.items()))
        print(f"{r.name}: {r.messages} messages, {r.replies} replies -- {verdict}; commits per message: {files}")
    print()
    targets(results)


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def targets(results: list[Result]) -> None:
    print("targets:")
    for r in results:
        per = max(1, r.messages)
        if r.name.startswith("20 msg/s"):
            cpu, p99 = 1000 * r.cpu / max(1, r.replies), 1000 * pct(r.latencies or [float("inf")], 0.99)
            print(f"  {r.name}: <= 2 ms CPU per reply: {cpu:.2f} ms {verdict(cpu <= 2)}; "
                  f"p99 added latency < 10 ms: {p99:.2f} ms {verdict(p99 < 10)}")
        if r.name.startswith("closed"):
            rate = r.replies / r.wall
            print(f"  {r.name}: >= 500 replies/s: {rate:.0f} {verdict(rate >= 500)}")
        kb, commits = r.wchar / per / 1024, r.commits / per
        print(f"  {r.name}: <= 16 KB written per message: {kb:.1f} KB {verdict(kb <= 16)}; "
              f"<= 2 commits per message: {commits:.2f} {verdict(commits <= 2)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="burst,closed,paced", help="any of burst,closed,paced")
    parser.add_argument("--messages", type=int, default=2000, help="messages in the burst")
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the closed loop and of each paced run")
    parser.add_argument("--rate", type=lambda text: [float(r) for r in text.split(",")], default=[200.0, 20.0],
                        help="offered msg/s of the paced runs, comma-separated")
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite files go (default: a temp dir)")
    parser.add_argument("--syscalls", action="store_true", help="run under strace to count fsync/fdatasync")
    parser.add_argument("--results", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    load = os.getloadavg()[0]
    if args.syscalls:
        results = under_strace(sys.argv[1:])
    else:
        results = asyncio.run(measure(args))
        if args.results:
            args.results.write_text(json.dumps([asdict(r) for r in results]))
            return
    print(f"the full turn: bench channel -> durable ingest -> lane -> real brain (instant model) -> outbox -> send; "
          f"{args.chats} chats, load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    table(results)


if __name__ == "__main__":
    main()
