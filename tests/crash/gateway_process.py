"""A real ``partners serve`` process that crash tests SIGKILL and restart on the same data dir.

Every channel's crash test drives its gateway through this: start it (and wait
until it prints the URL it serves on), kill it with SIGKILL at a moment the
test picks, start it again, and ask it over ``/status`` how much is still
waiting.  Run with ``PARTNERS_RESPONDER=echo_responder:make_responder`` and
``tests/crash`` on ``PYTHONPATH`` so every reply names what it answers.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import time
from pathlib import Path

import httpx

from tests.waits import HANG_S, HTTP_S

READY_RE = re.compile(r"(https?://[^\s/]+)")


class GatewayProcess:
    """``partners serve`` in its own process group; killed with SIGKILL, restarted on the same data."""

    def __init__(self, workdir: Path, config: Path, env: dict[str, str]) -> None:
        self.workdir, self.config, self.env = workdir, config, env
        self.process: asyncio.subprocess.Process | None = None
        self.url = ""
        self.starts = 0
        self._drain: asyncio.Task | None = None

    async def start(self) -> float:
        self.starts += 1
        began = time.monotonic()
        log = open(self.workdir / f"gateway-{self.starts}.log", "wb")
        self.process = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).with_name("partners")), "--config", str(self.config), "serve", "--port", "0",
            stdout=asyncio.subprocess.PIPE, stderr=log, env=self.env, cwd=self.workdir,
        )
        log.close()
        assert self.process.stdout is not None
        while True:
            line = (await asyncio.wait_for(self.process.stdout.readline(), HANG_S)).decode()
            if not line:
                code = await self.process.wait()
                tail = (self.workdir / f"gateway-{self.starts}.log").read_text(errors="replace")[-3000:]
                raise AssertionError(f"gateway start {self.starts} exited with {code} before it was ready:\n{tail}")
            if match := READY_RE.search(line):
                self.url = match.group(1)
                break
        self._drain = asyncio.create_task(self.process.stdout.read())  # keep the pipe from filling
        return time.monotonic() - began

    async def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), HANG_S)
            except TimeoutError:
                await self.kill()

    async def backlog(self) -> int:
        """Messages waiting plus replies not yet delivered, as the gateway reports them."""
        async with httpx.AsyncClient(trust_env=False) as http:
            report = (await http.get(f"{self.url}/status", timeout=HTTP_S)).json()
        return sum(a["inbound_pending"] + a["outbox_open"] for a in report["accounts"])
