"""What every crash test does the same way: a replayable seed, the gateway's environment, the kills, the wait.

A crash test plays one platform's users against a real ``partners serve``
(:class:`~tests.crash.gateway_process.GatewayProcess`) that it SIGKILLs and
restarts, then judges exactly-once from the platform's own record.  The
platform's part differs per channel; these steps do not.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

from tests.crash.gateway_process import GatewayProcess
from tests.peers.tencent_api import TencentPeer

ROOT = Path(__file__).resolve().parents[2]


def crash_seed() -> int:
    """``CRASH_SEED`` from the environment (to replay a run), else a new one; printed either way."""
    seed = int(os.environ.get("CRASH_SEED") or time.time())
    print(f"\nCRASH_SEED={seed}")
    return seed


def write_config(workdir: Path, channel: str, account: str, settings: dict[str, Any]) -> Path:
    """``partners.yaml`` of a crash test: one partner ("tutor") on one account, replies retried long enough
    to outlast every kill, nothing coalesced; ``settings`` is the account's own part."""
    config = {
        "data_dir": str(workdir / "data"),
        "http": {"host": "127.0.0.1", "port": 0},
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": channel, "account": account}],
        "channels": {channel: {account: settings}},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1, "delivery_max_attempts": 50},
    }
    path = workdir / "partners.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class CallbackGateway(GatewayProcess):
    """The gateway, and the emulated Tencent platform's callback URL pointed at it after each start
    (it serves on a new port each time)."""

    def __init__(self, peer: TencentPeer, webhook: str, workdir: Path, config: Path, env: dict[str, str]) -> None:
        super().__init__(workdir, config, env)
        self.peer, self.webhook = peer, webhook

    async def start(self) -> float:
        took = await super().start()
        self.peer.callback_url = f"{self.url}{self.webhook}"
        return took


def gateway_env(*, delta_delay: float = 0.0, plugins: bool = False, **secrets: str) -> dict[str, str]:
    """The environment of a crashed gateway: the echo responder (streamed when ``delta_delay`` > 0),
    the test plugin channels when ``plugins``, and the account's secrets."""
    paths = [ROOT / "tests" / "plugins"] if plugins else []
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(str(p) for p in [*paths, ROOT / "tests" / "crash", ROOT]),
        "PARTNERS_RESPONDER": "echo_responder:make_responder",
        "ECHO_DELTA_DELAY": str(delta_delay),
        **secrets,
    }


async def kill_and_restart(
    gateway: GatewayProcess, rng: random.Random, *, kills: int, between: tuple[float, float],
    kill_times: list[float] | None = None,
) -> list[float]:
    """SIGKILL the gateway ``kills`` times, ``between`` seconds apart, and start it again each time.

    Returns how long each restart took to be ready; ``kill_times`` (wall clock) is filled when given.
    """
    ready = []
    for _ in range(kills):
        await asyncio.sleep(rng.uniform(*between))
        if kill_times is not None:
            kill_times.append(time.time())
        await gateway.kill()
        await asyncio.sleep(rng.uniform(0, 0.3))
        ready.append(await gateway.start())
    return ready


async def kill_then_stay_down(
    gateway: GatewayProcess, rng: random.Random, stop: asyncio.Event, *, quick_kills: int,
    calm: tuple[float, float], said_into_outage_s: float, down_s: float,
) -> list[float]:
    """``quick_kills`` kills with a quick restart, then one that stays down ``down_s``: learners keep writing
    for its first ``said_into_outage_s`` (``stop`` is set then), so a platform's redeliveries run out on some.

    Returns how long each restart took to be ready."""
    ready = await kill_and_restart(gateway, rng, kills=quick_kills, between=(1.5, 3.5))
    await asyncio.sleep(rng.uniform(*calm))
    await gateway.kill()
    await asyncio.sleep(said_into_outage_s)
    stop.set()
    await asyncio.sleep(down_s - said_into_outage_s)
    return [*ready, await gateway.start()]


async def wait_until(check: Callable[[], Awaitable[bool] | bool], *, within: float, what: str, poll: float = 0.25) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        done = check()
        if inspect.isawaitable(done):
            done = await done
        if done:
            return
        assert time.monotonic() < deadline, f"{what} within {within:g} s of the last restart"
        await asyncio.sleep(poll)


async def until_settled(gateway: GatewayProcess, *, within: float, what: str) -> None:
    """Wait until the gateway has nothing left to do: no message waiting for a turn, no reply for its send."""

    async def settled() -> bool:
        return await gateway.backlog() == 0

    await wait_until(settled, within=within, what=what)
