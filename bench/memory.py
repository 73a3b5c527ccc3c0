"""Memory per idle channel account: N relay accounts long-polling the relay emulator.

Each measurement runs in a fresh child process: a Gateway with ``accounts``
relay accounts (the ``relay`` plugin channel from ``tests/plugins``, loaded
through its entry point) against one relay platform process, waits until
every account has a long poll open at the platform, lets it settle, and
reports its RSS.  Per account = (RSS with 1 + N accounts - RSS with 1) / N, so
imports, the store and the shared HTTP client are not counted; the poll
connection, the channel, its supervisor task and its pipeline state are.

The last line shows what one ``httpx.AsyncClient`` costs with its own SSL
context (httpx's default: the CA bundle is loaded per client) and with a
shared one, which is why the relay channel gives each account a small client
of its own but shares the SSL context (tests/plugins/relaychat/transport.py).

Usage: python bench/memory.py [--accounts 1000] [--settle 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "plugins")]


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


async def measure_gateway(peer_url: str, accounts: int, settle: float, prefix: str) -> dict:
    import httpx

    from gateway.app import Gateway
    from gateway.configfile import parse_config

    channels = {}
    for i in range(accounts):
        os.environ[f"RELAY_TOKEN_{i}"] = f"{prefix}{i}"
        channels[f"a{i}"] = {"base_url": peer_url, "token": f"env:RELAY_TOKEN_{i}", "poll_timeout": 50}
    with tempfile.TemporaryDirectory() as tmp:
        config = parse_config({"data_dir": tmp, "channels": {"relay": channels}})
        gateway = Gateway(config)
        await gateway.start()
        async with httpx.AsyncClient(base_url=peer_url, trust_env=False) as control:
            deadline = time.monotonic() + 120
            while True:
                polling = (await control.get("/test/polling", params={"prefix": prefix})).json()["polling"]
                if polling >= accounts or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
        await asyncio.sleep(settle)
        gc.collect()
        rss = rss_kib()
        await gateway.stop()
    return {"accounts": accounts, "polling": polling, "rss_kib": rss}


async def measure_clients(count: int) -> dict:
    """RSS of ``count`` AsyncClients each building its own SSL context, and sharing one."""
    import httpx
    from relaychat.transport import new_client

    costs = {}
    for label, make, n in (("own", httpx.AsyncClient, min(count, 100)), ("shared", new_client, count)):
        gc.collect()
        before = rss_kib()
        clients = [make() for _ in range(n)]  # an own SSL context takes ~30 ms to build: 100 show the cost
        gc.collect()
        costs[label] = (rss_kib() - before) / n
        for client in clients:
            await client.aclose()
    return costs


def child(args: list[str]) -> dict:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"measuring child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description="RSS per idle long-polling relay account.")
    parser.add_argument("--accounts", type=int, default=1000)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds to wait after every account polls")
    parser.add_argument("--child", nargs=3, metavar=("PEER", "ACCOUNTS", "PREFIX"), help=argparse.SUPPRESS)
    parser.add_argument("--clients", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        peer, accounts, prefix = args.child
        print(json.dumps(asyncio.run(measure_gateway(peer, int(accounts), args.settle, prefix))))
        return
    if args.clients:
        print(json.dumps(asyncio.run(measure_clients(args.clients))))
        return

    from tests.peers.relay_platform import RelayPeer

    with tempfile.TemporaryDirectory() as tmp:
        peer = RelayPeer.start(Path(tmp) / "relay.json")
        try:
            import httpx

            with httpx.Client(base_url=peer.url, trust_env=False) as control:
                tokens = ["one-0", *(f"many-{i}" for i in range(1 + args.accounts))]
                control.post("/test/bots", json={"tokens": tokens}).raise_for_status()
            one = child(["--settle", str(args.settle), "--child", peer.url, "1", "one-"])
            many = child(["--settle", str(args.settle), "--child", peer.url, str(1 + args.accounts), "many-"])
        finally:
            peer.stop()
    clients = child(["--clients", str(args.accounts)])
    per_account = (many["rss_kib"] - one["rss_kib"]) / args.accounts
    print(f"{'gateway process':<34} {'accounts':>8} {'polling':>8} {'RSS MiB':>9}")
    for run in (one, many):
        print(f"{'relay accounts, long-polling':<34} {run['accounts']:>8} {run['polling']:>8} {run['rss_kib'] / 1024:>9.1f}")
    print(f"\nper idle account: {per_account:.0f} KiB  (target <= 200 KB)  {'ok' if per_account * 1.024 <= 200 else 'MISSED'}")
    print(f"one httpx.AsyncClient, before any connection: {clients['own']:.0f} KiB with its own SSL context, "
          f"{clients['shared']:.1f} KiB sharing one (what the relay channel does)")


if __name__ == "__main__":
    main()
