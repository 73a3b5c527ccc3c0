"""The brain's own cost per round, and how soon a model's first token is visible on web chat.

Two runs:

- **overhead**: the brain exactly as the gateway builds it
  (``brain.factory.build_brain``: study-buddy persona, the built-in tools,
  ``knowledge_search`` over the real notes index, memory, the SQLite session
  log and usage ledger in a temporary directory), except that the one model
  client the factory makes is :class:`InstantModel`, a ``ModelClient`` that
  answers at once from prepared objects and clocks its own time.  It is driven
  directly (no pipeline) by N turns of 1-3 rounds.  A round is the span from
  one model call to the next (the first also holds the turn's setup, the last
  its end), minus the fake model's own time: reading the log, building and
  hashing the request, filtering the streamed text, running the tools, every
  log write, and whatever summary or memory consolidation ran meanwhile.
- **web chat**: a real ``Gateway`` (its own brain, litellm, the web chat
  channel and HTTP app) against the stub model, which waits before the first
  token and between tokens.  The stub clocks when it hands each answer's first
  text chunk to its socket; a learner following ``/api/events`` (SSE, over
  httpx) clocks when the first ``message`` event with text arrives.  All of it
  runs in one process and event loop, so the learner's own reading is counted
  against us too.

Usage: python bench/brain.py [--turns 300] [--conversations 10] [--web-turns 30]
       [--first-token-delay 0.3] [--token-gap 0.03] [--seed 1] [--dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import sys
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "plugins")]

from brain import factory  # noqa: E402
from brain.loop import Brain  # noqa: E402
from brain.types import FinishReason, ModelRequest, ModelResult, TextDelta, ToolCall, Usage  # noqa: E402
from gateway.configfile import parse_config  # noqa: E402
from gateway.core.config import ModelSettings, PartnerConfig  # noqa: E402
from gateway.core.messages import (  # noqa: E402
    AccountId,
    Address,
    ChannelName,
    ChatId,
    Conversation,
    ConversationKind,
    EventId,
    InboundMessage,
    Sender,
    Text,
    UserId,
)
from gateway.core.turns import Role, Turn  # noqa: E402

ANSWER = (
    "Good question! Plants catch light with chlorophyll in their leaves and use that energy to turn water and "
    "carbon dioxide into glucose, a sugar they use for energy and to grow. Oxygen is what is left over, and it "
    "goes out through tiny pores called stomata. Can you tell me in your own words where the carbon comes from?"
)
WEB_ANSWER = ANSWER.split(" Oxygen")[0]
"""The web chat run streams a shorter answer (about 30 chunks): only its start is being timed."""
QUERIES = ("photosynthesis", "fractions", "water cycle", "newton's laws", "french revolution", "parts of speech")
PIECE = 4
"""Characters per streamed delta: about one token, as real models stream."""


# --------------------------------------------------------------------------- overhead: an instant model


@dataclass
class Call:
    began: float
    side: bool
    """Not a round of a turn: a history summary or a memory consolidation."""
    own: float = 0.0
    """Seconds spent inside the fake model itself (between being resumed and yielding)."""


@dataclass
class InstantModel:
    """A ModelClient with zero latency: each round call yields a prepared round, and it clocks itself.

    Rounds are told apart from the brain's other calls by their system prompt, which opens with the persona."""

    rounds: deque[list[TextDelta | ModelResult]] = field(default_factory=deque)
    calls: list[Call] = field(default_factory=list)

    def native_tools(self, model: str) -> bool:
        return True

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResult]:
        began = time.perf_counter()
        call = Call(began, side=not request.messages[0].content.startswith(PERSONA_HEAD))
        self.calls.append(call)
        items = SIDE_ANSWER if call.side else self.rounds.popleft()
        for item in items:
            call.own += time.perf_counter() - began
            yield item
            began = time.perf_counter()
        call.own += time.perf_counter() - began


PERSONA_HEAD = "You are Study Buddy."
SIDE_ANSWER = [ModelResult(text="The learner is revising photosynthesis [^1].", usage=Usage(completion_tokens=10))]


def answer_round() -> list[TextDelta | ModelResult]:
    pieces: list[TextDelta | ModelResult] = [TextDelta(text=ANSWER[i:i + PIECE]) for i in range(0, len(ANSWER), PIECE)]
    return [*pieces, ModelResult(text=ANSWER, usage=Usage(prompt_tokens=40, completion_tokens=20))]


def tool_round(rng: random.Random, number: int) -> tuple[str, list[TextDelta | ModelResult]]:
    if rng.random() < 0.7:
        name, arguments = "knowledge_search", {"query": rng.choice(QUERIES)}
    else:
        name, arguments = "memory_write", {"text": f"Working on {rng.choice(QUERIES)} (note {number})."}
    call = ToolCall(id=f"call_{number}", name=name, arguments=json.dumps(arguments))
    return name, [ModelResult(text="", tool_calls=(call,), finish_reason=FinishReason.TOOL_CALLS)]


PARTNER = PartnerConfig(id="buddy", name="Study Buddy", persona="study-buddy", model=ModelSettings(model="bench/instant"))
"""The partner every overhead turn is for: the shipped study-buddy persona on the instant model."""


def instant_brain(workdir: Path, model: InstantModel) -> factory.BuiltBrain:
    """The brain exactly as the gateway builds it (``brain.factory.build_brain``), but on the instant model.

    Reminders and teacher hand-offs are the gateway's services; no round here calls them."""
    config = parse_config({"data_dir": str(workdir), "partners": [PARTNER.model_dump(mode="json")]})
    # The one model client the factory builds (for the loop, summaries, memory consolidation) is the instant one.
    with mock.patch.object(factory, "LitellmClient", lambda *_args, **_options: model):
        return factory.build_brain(config, scheduler=None, handoff=None)


def turn_in(conversation: str, number: int) -> Turn:
    message = InboundMessage(
        event_id=EventId(f"e{number}"),
        address=Address(channel=ChannelName("bench"), account=AccountId("a"),
                        conversation=Conversation(chat=ChatId(conversation), kind=ConversationKind.DIRECT)),
        sender=Sender(user=UserId(conversation), display_name="Ann"),
        elements=(Text(text=f"Question {number}: can you explain {QUERIES[number % len(QUERIES)]}?"),),
        received_at=datetime.now(UTC),
        addressed=True,
    )
    return Turn(PARTNER, message.address, message.sender, Role.LEARNER, [message])


async def run_turn(brain: Brain, model: InstantModel, turn: Turn, plan: list[tuple[str, list]]) -> list[tuple[str, float]]:
    """Run one turn; return (kind, seconds of brain time) for each of its rounds."""
    model.rounds.extend(items for _, items in plan)
    first = len(model.calls)
    began = time.perf_counter()
    async for _event in brain.respond(turn):
        pass
    ended = time.perf_counter()
    calls = model.calls[first:]
    rounds = [c for c in calls if not c.side]
    assert len(rounds) == len(plan), f"planned {len(plan)} rounds, the brain made {len(rounds)} calls"
    edges = [began, *(c.began for c in rounds[1:]), ended]
    spans = []
    for number, (kind, _) in enumerate(plan):
        start, stop = edges[number], edges[number + 1]
        own = sum(c.own for c in calls if start <= c.began < stop)
        spans.append((kind, stop - start - own))
    return spans


async def overhead(workdir: Path, turns: int, conversations: int, seed: int) -> tuple[dict[str, list[float]], int]:
    """Brain seconds per round, by row label; and how many other model calls (summaries, consolidations) ran."""
    rng = random.Random(seed)
    model = InstantModel()
    built = instant_brain(workdir, model)
    brain = built.responder
    for number in range(3):  # warm up: persona cache, notes index, SQLite files
        await run_turn(brain, model, turn_in("warm-up", number), [tool_round(rng, number), ("answer", answer_round())])
    by_kind: dict[str, list[float]] = {}
    by_position: dict[str, list[float]] = {"first third": [], "last third": []}
    per_conversation = max(1, turns // conversations)
    for number in range(turns):
        conversation = f"c{number % conversations}"
        plan = [tool_round(rng, number) for _ in range(rng.randrange(3))] + [("answer", answer_round())]
        spans = await run_turn(brain, model, turn_in(conversation, number), plan)
        position = number // conversations
        for kind, seconds in spans:
            by_kind.setdefault("all rounds", []).append(seconds)
            label = "answer rounds (streamed text)" if kind == "answer" else f"tool rounds ({kind})"
            by_kind.setdefault(label, []).append(seconds)
            if position < per_conversation / 3:
                by_position["first third"].append(seconds)
            elif position >= per_conversation * 2 / 3:
                by_position["last third"].append(seconds)
    await built.close()
    side = sum(call.side for call in model.calls)
    rows = {**by_kind, **{f"rounds, {k} of each conversation": v for k, v in by_position.items()}}
    return rows, side


# --------------------------------------------------------------------------- web chat: first token to first text


class FirstTokenClock:
    """ASGI middleware around the stub: when each answer's first text chunk went to the socket."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.sent: list[float] = []

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        waiting = True

        async def clocked(message: dict) -> None:
            nonlocal waiting
            await send(message)
            if waiting and message["type"] == "http.response.body" and _has_text(message.get("body", b"")):
                self.sent.append(time.perf_counter())
                waiting = False

        await self.app(scope, receive, clocked)


def _has_text(body: bytes) -> bool:
    if not body.startswith(b"data: {"):
        return False
    choices = json.loads(body[6:]).get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


async def serve_stub(app: Any) -> tuple[str, Any, asyncio.Task]:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.005)
    return f"http://127.0.0.1:{sock.getsockname()[1]}/v1", server, task


async def web_first_text(workdir: Path, turns: int, first_token_delay: float, token_gap: float) -> list[float]:
    from gateway.app import Gateway
    from gateway.configfile import parse_config
    from tests.e2e.rig import STUB_KEY_ENV, WebLearner, e2e_config, served
    from tests.peers.model_stub import Reply, StubState, build_app

    os.environ.setdefault(STUB_KEY_ENV, "sk-bench")
    os.environ.pop("PARTNERS_RESPONDER", None)
    reply = Reply.text(WEB_ANSWER, chunk=PIECE, delay=first_token_delay, pause=token_gap)
    state = StubState(responder=lambda _body: reply)
    clock = FirstTokenClock(build_app(state))
    api_base, stub, stub_task = await serve_stub(clock)
    gateway = Gateway(parse_config(e2e_config(workdir / "data", api_base)))
    await gateway.start()
    latencies = []
    try:
        async with served(gateway) as url:
            for number in range(turns + 1):  # turn 0 warms up (it imports litellm)
                # A learner (page session) per turn: a learner's daily token budget never ends the run.
                learner = await WebLearner(url).open()
                try:
                    await learner.say(f"Question {number}: how do plants make food?")
                    [final] = await learner.wait_for(lambda page: page.finished(), timeout=60)
                finally:
                    await learner.close()
                assert final.text == WEB_ANSWER, final.text
                assert len(clock.sent) == number + 1, "one model call per turn"
                first_text = next(shown.at for shown in learner.shown if shown.text)
                if number:
                    latencies.append(first_text - clock.sent[-1])
    finally:
        await gateway.stop()
        state.stopping.set()
        stub.should_exit = True
        await stub_task
    return latencies


# --------------------------------------------------------------------------- the table


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def row(label: str, values: list[float]) -> str:
    ms = [1000 * v for v in values]
    return f"{label:<44} {len(ms):>6} {pct(ms, 0.5):>8.2f} {pct(ms, 0.99):>8.2f} {max(ms):>8.2f}"


HEADER = f"{'':<44} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300, help="turns in the overhead run")
    parser.add_argument("--conversations", type=int, default=10, help="conversations the overhead turns are spread over")
    parser.add_argument("--web-turns", type=int, default=30, help="turns in the web chat run")
    parser.add_argument("--first-token-delay", type=float, default=0.3, help="seconds the stub waits before answering")
    parser.add_argument("--token-gap", type=float, default=0.03, help="seconds between the stub's streamed chunks")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=None, help="where the SQLite files go (default: a temp dir)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        rows, side_calls = await overhead(Path(tmp), args.turns, args.conversations, args.seed)
    print(f"brain overhead per round: {args.turns} turns of 1-3 rounds over {args.conversations} conversations, "
          f"instant model (its own time excluded), SQLite session log; "
          f"{side_calls} other model calls (summaries, memory consolidations) ran meanwhile")
    print(HEADER)
    print("-" * len(HEADER))
    for label, values in rows.items():
        print(row(label, values))
    overhead_p99 = 1000 * pct(rows["all rounds"], 0.99)

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        latencies = await web_first_text(Path(tmp), args.web_turns, args.first_token_delay, args.token_gap)
    print(f"\nweb chat, model's first token -> first text at the learner (SSE): {args.web_turns} turns, "
          f"stub waits {args.first_token_delay:g} s then streams {PIECE}-character chunks {args.token_gap:g} s apart")
    print(HEADER)
    print("-" * len(HEADER))
    print(row("first token -> first visible text", latencies))
    web_p99 = 1000 * pct(latencies, 0.99)

    print(f"\ntargets: brain overhead p99 < 5 ms per round: {overhead_p99:.2f} ms ({'ok' if overhead_p99 < 5 else 'MISSED'}); "
          f"first token -> first text p99 < 150 ms: {web_p99:.1f} ms ({'ok' if web_p99 < 150 else 'MISSED'})")


if __name__ == "__main__":
    asyncio.run(main())
