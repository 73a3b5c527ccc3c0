"""What a channel brings to the contract suite: a harness around its peer.

The suite (``test_channel_contract.py``) runs every test against every
harness in :data:`HARNESSES`.  A harness starts the channel's peer -- a real
server or a socket-level emulator, on loopback -- builds a gateway config for
one account of the channel, plays the platform's users (says something, says
it again, speaks as the bot's own account) and reports what those users see.

A new channel joins the suite by writing one harness module and adding a line
to :data:`HARNESSES`.  Where a platform cannot do something (web chat has no
rate limits and no echo of the bot's own posts), the harness leaves the
feature out of ``features`` and the tests that need it are not generated for
it -- they are absent, not skipped.

Features: ``groups`` (group chats with mention addressing), ``own_echo``
(the platform can deliver a message written by the bot's own account),
``faults`` (the peer can answer the next send with 429, 401, 503 or 400),
``lost_response`` (the peer can answer the next send with 504 *after* posting
it, and deduplicates a retried send by its idempotency key, so one message
shows -- only platforms that take an idempotency key can promise this),
``outage`` (the peer can go down and come back), ``slow_send`` (the peer can
answer sends slowly, after posting them), ``credentials`` (the account logs in
with something the platform can refuse: a token, a password), ``fetches_media``
(the channel uploads a reply's file by its bytes, so a URL-only file is
fetched by the gateway: the harness serves it on loopback), ``errcodes``
(with ``faults``: the platform refuses in a 200 with its own code and no
retry-after, as WeChat's ``cgi-bin`` does; the harness maps each of the
suite's statuses to that code, :meth:`ContractHarness.errcode`).
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from gateway.core.capabilities import TextUnit
from gateway.core.config import Config
from gateway.core.events import StreamDelta, StreamEnd, TurnEnd
from gateway.core.messages import Attachment
from gateway.core.turns import Turn
from tests.waits import HANG_S


@dataclass(frozen=True)
class Said:
    """A message a user said at the peer, with the ids the gateway should normalize it to."""

    chat: str
    user: str
    text: str
    ref: Any = None
    """Whatever the harness needs to say it again (update id, message id)."""


@dataclass(frozen=True)
class Seen:
    """One bot message as the platform's user sees it now (after any edits)."""

    id: str
    text: str
    reply_to: str | None = None
    attachments: tuple[str, ...] = ()


class Harness(Protocol):
    channel: str
    account: str
    features: frozenset[str]

    @classmethod
    def create(cls, request: Any) -> Harness:
        """Build one for a test; ``request`` is pytest's, to reach session fixtures (a shared peer)."""

    async def start(self, workdir: Path) -> None:
        """Start (or connect to) the peer; called before the gateway starts."""

    def gateway_config(self, data_dir: Path) -> Config:
        """A config with partner ``tutor`` bound to this account, DMs open, no coalescing."""

    async def attach(self, gateway: Any) -> None:
        """Called once the gateway runs (web chat starts its HTTP app here)."""

    def refused_credentials(self, data_dir: Path) -> tuple[Config, str]:
        """Feature ``credentials``: the account's config with credentials the platform refuses, and that
        refused secret (which no probe result may show)."""

    async def say(self, text: str, *, chat: str | None = None, group: bool = False, mention: bool = False) -> Said: ...

    async def say_again(self, said: Said) -> None:
        """Deliver the same platform event once more (redelivery)."""

    async def say_as_bot(self, text: str, *, chat: str) -> Said:
        """Feature ``own_echo``: a message authored by the bot's own account."""

    async def seen(self, chat: str) -> list[Seen]: ...

    async def fail_next_send(self, status: int, retry_after: float = 1.0) -> None:
        """Feature ``faults``: the peer answers the next send with ``status`` (429 with ``retry_after``);
        feature ``lost_response``: 504 means "posted, but the answer is lost"."""

    def errcode(self, status: int) -> int:
        """Feature ``errcodes``: the platform's code that means what the suite's HTTP ``status`` does."""

    async def rate_limited_sends(self) -> int:
        """Feature ``faults``: how many sends the peer answered with 429 (``errcodes``: with the code for it)."""

    async def send_requests(self) -> int:
        """Feature ``faults``: how many send requests the peer received from this account, whatever it answered
        (a retry counts again) -- what shows a second retry layer hiding in an SDK."""

    async def outage(self, down: bool) -> None:
        """Feature ``outage``: the peer stops answering (every call fails) or comes back."""

    async def slow_sends(self, seconds: float) -> None:
        """Feature ``slow_send``: every send is posted at once but answered ``seconds`` later."""

    async def media_url(self, name: str) -> str:
        """Feature ``fetches_media``: a loopback URL serving a small image called ``name``, for a channel that
        must fetch a file by URL to upload its bytes (personal WeChat); :meth:`seen` then names a file the
        learner received by the URL whose bytes it has."""

    async def stop(self) -> None: ...


HARNESSES: dict[str, str] = {
    "relay": "tests.contract.relay_harness:RelayHarness",
    "telegram": "tests.contract.telegram_harness:TelegramHarness",
    "webchat": "tests.contract.webchat_harness:WebchatHarness",
    "email": "tests.contract.email_harness:EmailHarness",
    "matrix": "tests.contract.matrix_harness:MatrixHarness",
    "slack": "tests.contract.slack_harness:SlackHarness",
    "discord": "tests.contract.discord_harness:DiscordHarness",
    "wecom": "tests.contract.wecom_harness:WecomHarness",
    "wecom_app": "tests.contract.wecom_app_harness:WecomAppHarness",
    "weixin": "tests.contract.weixin_harness:WeixinHarness",
    "weixin_ilink": "tests.contract.weixin_ilink_harness:IlinkHarness",
    "qq": "tests.contract.qq_harness:QQHarness",
    "qq_ws": "tests.contract.qq_harness:QQWebsocketHarness",
    "napcat": "tests.contract.napcat_harness:NapcatHarness",
    "dingtalk": "tests.contract.dingtalk_harness:DingtalkHarness",
    "feishu": "tests.contract.feishu_harness:FeishuHarness",
    "mochat": "tests.contract.mochat_harness:MochatHarness",
    "whatsapp": "tests.contract.whatsapp_harness:WhatsappHarness",
    "mattermost": "tests.contract.mattermost_harness:MattermostHarness",
}
"""harness name (the channel, or channel_kind for a second kind) -> harness class.  A new channel adds one line here."""


def harness_class(name: str) -> Any:
    """The harness class for a channel; it has ``features`` and ``create(request) -> Harness``."""
    module, _, attr = HARNESSES[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def with_feature(feature: str) -> list[str]:
    return [name for name in HARNESSES if feature in harness_class(name).features]


# --------------------------------------------------------------------------- the responder the suite drives


class ContractResponder:
    """Answers every turn with ``answer(turn)`` (by default an echo) and records the turns."""

    name = "contract"

    def __init__(self) -> None:
        self.answer: Callable[[Turn], str] = lambda turn: "echo: " + " | ".join(m.text for m in turn.messages)
        self.attachments: tuple[Attachment, ...] = ()
        self.stream: list[str] = []
        """When set, the answer is streamed as these deltas, ``delta_delay`` apart, before it ends."""
        self.delta_delay = 0.05
        self.turns: list[Turn] = []

    async def respond(self, turn: Turn) -> AsyncIterator:
        self.turns.append(turn)
        for delta in self.stream:
            yield StreamDelta(text=delta)
            await asyncio.sleep(self.delta_delay)
        yield StreamEnd(markdown="".join(self.stream) or self.answer(turn), attachments=self.attachments)
        yield TurnEnd()


# --------------------------------------------------------------------------- waiting and measuring


async def eventually(check: Callable[[], Any], *, timeout: float = HANG_S, what: str = "condition") -> Any:
    """Poll ``check`` (plain or async) until it returns something truthy; fail with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; last saw {result!r}")
        await asyncio.sleep(0.02)


def counter(gateway: Any, name: str, **labels: str) -> float:
    """Sum of a gateway metric's samples whose labels include ``labels``."""
    total = 0.0
    for metric in gateway.metrics.registry.collect():
        for sample in metric.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def settled(gateway: Any) -> bool:
    """Nothing queued for dispatch and no conversation lane running."""
    return gateway.dispatcher.backlog == 0 and gateway.lanes.active == 0


def units(text: str, unit: TextUnit) -> int:
    """Length in a platform's unit -- written here independently of the gateway's own measure."""
    if unit is TextUnit.UTF16:
        return len(text.encode("utf-16-le")) // 2
    if unit is TextUnit.BYTES:
        return len(text.encode("utf-8"))
    return len(text)  # chars and runes are code points


def text_of(length: int, unit: TextUnit) -> str:
    """Words of mixed width (ASCII, Latin-1, an astral emoji) measuring exactly ``length`` units.

    Mixed widths make a splitter that counts in the wrong unit cut where it should not.
    """
    chunk = "ab\U0001f600 cd\u00e9 "
    out: list[str] = []
    used = 0
    while used + units(chunk, unit) + 1 <= length:
        out.append(chunk)
        used += units(chunk, unit)
    out.append("x" * (length - used))  # at least one: a reply never ends in a space
    return "".join(out)


@dataclass
class Rig:
    """A running gateway with one harnessed channel account and the contract responder."""

    harness: Harness
    gateway: Any
    responder: ContractResponder

    async def replies(self, chat: str, count: int, *, what: str = "replies") -> list[Seen]:
        async def enough():
            seen = await self.harness.seen(chat)
            return seen if len(seen) >= count else None

        return await eventually(enough, what=f"{count} {what} in chat {chat}")

    async def quiet(self) -> None:
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")
