"""A gateway with one personal WeChat account (``kind: ilink``) on the iLink emulator, over loopback HTTP.

The account is logged in the way a teacher does it -- the QR login against
the emulator, the session stored in the gateway's own SQLite store -- before
the gateway starts.  The gateway is the real one, answering with the contract
suite's echoing responder unless a test builds the brain.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gateway.app import AccountCursors, Gateway
from gateway.configfile import parse_config
from tests.contract.harness import ContractResponder, eventually, settled
from tests.peers.weixin_ilink_server import IlinkPeer, serving

TEACHER = "teacher@im.wechat"


@dataclass
class IlinkRig:
    peer: IlinkPeer
    raw: dict[str, Any]
    responder: ContractResponder | None
    gateway: Gateway | None = None
    states: list[str] = field(default_factory=list)

    async def texts(self, learner: str, count: int) -> list[str]:
        async def enough():
            texts = self.peer.texts_to(learner)
            return texts if len(texts) >= count else None

        return await eventually(enough, what=f"{count} messages to {learner}")

    async def quiet(self) -> None:
        assert self.gateway is not None
        await eventually(lambda: settled(self.gateway), what="the gateway to settle")

    @property
    def database(self) -> Path:
        return Path(self.raw["data_dir"]) / "gateway.db"

    def inbound_rows(self) -> int:
        with closing(sqlite3.connect(self.database)) as db:
            return db.execute("SELECT count(*) FROM inbound WHERE channel = 'weixin'").fetchone()[0]

    def stored(self, name: str) -> str | None:
        with closing(sqlite3.connect(self.database)) as db:
            row = db.execute("SELECT value FROM cursors WHERE channel = 'weixin' AND account = 'school' AND name = ?",
                             (name,)).fetchone()
        return row[0] if row else None


async def log_in(rig: IlinkRig) -> None:
    """The QR login as the teacher does it: the code shown, scanned, confirmed; the session stored."""
    from channels.weixin.config import IlinkConfig
    from channels.weixin.ilink.login import login
    from gateway.store.sqlite import SqliteStore

    settings = IlinkConfig.model_validate(rig.raw["channels"]["weixin"]["school"])
    rig.database.parent.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(rig.database)
    await store.open()
    try:
        links: list[str] = []
        task = asyncio.create_task(login(settings, AccountCursors(store, "weixin", "school"), account="school",
                                         show=links.append, said=lambda state: rig.states.append(state.value)))
        await eventually(lambda: "wait" in rig.peer.answered, what="the first status answer")
        await rig.peer.scan()
        await eventually(lambda: "scaned" in rig.peer.answered, what="the scan to be seen")
        await rig.peer.confirm()
        await asyncio.wait_for(task, 10)
        assert links and links[0].startswith("https://")
    finally:
        await store.close()


@pytest.fixture
async def ilink_rig(tmp_path) -> AsyncIterator[Callable[..., Awaitable[IlinkRig]]]:
    """``await ilink_rig()``: a fresh bot at a fresh emulator, logged in, and a gateway answering it."""
    async with contextlib.AsyncExitStack() as stack:
        counter = iter(range(100))

        async def open_(*, config: Callable[[dict], dict] | None = None, responder: ContractResponder | None = None,
                        login: bool = True, start: bool = True) -> IlinkRig:
            peer = IlinkPeer()
            base = await stack.enter_async_context(serving(peer))
            raw = {
                "data_dir": str(tmp_path / f"data-{next(counter)}"),
                "partners": [{"id": "tutor", "name": "Tutor",
                              "owners": [{"channel": "weixin", "user": TEACHER, "account": "school"}]}],
                "bindings": [{"partner": "tutor", "channel": "weixin", "account": "school"}],
                "channels": {"weixin": {"school": {"base_url": base, "cdn_base_url": base + "c2c/",
                                                     "poll_timeout_s": 1, "access": {"dm": "open"}}}},
                "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
            }
            rig = IlinkRig(peer, config(raw) if config else raw,
                           ContractResponder() if responder is None and config is None else responder)
            if login:
                await log_in(rig)
            if start:
                await start_gateway(rig, stack)
            return rig

        yield open_


async def start_gateway(rig: IlinkRig, stack: contextlib.AsyncExitStack) -> Gateway:
    gateway = Gateway(parse_config(rig.raw), responder=rig.responder)
    await gateway.start()
    stack.push_async_callback(gateway.stop)
    assert gateway.channel("weixin", "school") is not None, gateway.unavailable
    rig.gateway = gateway
    return gateway
