"""Start-up time: ``partners --help`` and ``partners serve`` until it says it is ready.

``--help`` is timed as a whole process (spawn to exit).  ``serve`` is timed
from spawn until the line with the URL appears on stdout -- the moment the
gateway has opened its store, started its channels and listens -- and, as a
cross-check, until ``GET /healthz`` answers 200.  Each serve run uses a fresh
data directory and a web chat account (the embedded default's shape), then
is stopped with SIGTERM.

Usage: python bench/startup.py [--help-runs 10] [--serve-runs 5] [--partners PATH]
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

READY_RE = re.compile(r"(https?://[^\s/]+)")


def time_help(partners: str) -> float:
    began = time.perf_counter()
    subprocess.run([partners, "--help"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


def time_serve(partners: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "partners.yaml"
        config.write_text(yaml.safe_dump({
            "data_dir": str(Path(tmp) / "data"),
            "partners": [{"id": "study-buddy", "name": "Study Buddy"}],
            "bindings": [{"partner": "study-buddy", "channel": "webchat", "account": "default"}],
            "channels": {"webchat": {"default": {"access": {"dm": "open"}}}},
        }))
        began = time.perf_counter()
        process = subprocess.Popen([partners, "--config", str(config), "serve", "--port", "0", "--log-level", "warning"],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if match := READY_RE.search(line):
                    ready = time.perf_counter() - began
                    break
            else:
                raise RuntimeError(f"partners serve exited with {process.wait()} before it was ready")
            with httpx.Client(trust_env=False) as http:
                while http.get(f"{match.group(1)}/healthz").status_code != 200:
                    time.sleep(0.005)
            healthy = time.perf_counter() - began
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(15)
    return ready, healthy


def main() -> None:
    parser = argparse.ArgumentParser(description="Time partners --help and partners serve start-up.")
    parser.add_argument("--help-runs", type=int, default=10)
    parser.add_argument("--serve-runs", type=int, default=5)
    parser.add_argument("--partners", default=shutil.which("partners") or str(Path(sys.executable).with_name("partners")))
    args = parser.parse_args()

    time_help(args.partners)  # warm the page cache and bytecode, as a second run would
    helps = [time_help(args.partners) for _ in range(args.help_runs)]
    serves = [time_serve(args.partners) for _ in range(args.serve_runs)]
    rows = [
        ("partners --help", helps, 0.3),
        ("serve: ready line", [r for r, _ in serves], 2.0),
        ("serve: /healthz 200", [h for _, h in serves], 2.0),
    ]
    print(f"{'measure':<22} {'runs':>4} {'median s':>9} {'min s':>7} {'max s':>7} {'target s':>9}")
    for label, values, target in rows:
        median = statistics.median(values)
        mark = "ok" if median < target else "MISSED"
        print(f"{label:<22} {len(values):>4} {median:>9.3f} {min(values):>7.3f} {max(values):>7.3f} {'< ' + str(target):>9} {mark}")


if __name__ == "__main__":
    main()
