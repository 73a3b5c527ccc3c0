"""Start-up: ``partners --help``, ``partners serve`` until ready, its first answer, and the base install.

``--help`` is timed as a whole process (spawn to exit).  ``serve`` is timed
from spawn until the line with the URL appears on stdout -- the moment the
gateway has opened its store, started its channels and listens -- and, as a
cross-check, until ``GET /healthz`` answers 200.  Each serve run uses a fresh
data directory and a web chat account (the embedded default's shape), then
is stopped with SIGTERM.

**First answer**: a ``partners serve`` whose partner has a model -- the stub
model process (``tests/peers/model_stub.py``, reached by litellm over HTTP,
answering ``echo: <question>`` at once) -- timed to its ready line and to
``/healthz``; then a learner opens a web chat page session, posts a question
and follows ``/api/events`` until the answer's final version arrives.  Asked
at once, the time runs from ``/healthz`` answering to the answer, and holds
whatever is left of importing the model library (litellm, seconds of CPU),
which ``serve`` starts in a worker thread once it listens; asked
``--ask-after`` seconds later (a person opening the page and typing), it
runs from the question to the answer.

**Install**: ``pip install -e .`` (the base, no extras) into a fresh venv in a
temporary directory, with a fresh, empty pip cache (``PIP_CACHE_DIR`` in the
same directory), timed as a whole; then the venv's size on disk (as ``du``
counts it, the venv's own pip and setuptools included: the empty venv's size
is printed beside it).  pip reads the machine's pip configuration, so what it
downloads from where (a registry, a local mirror or wheel folder) is the
machine's: say so with the figures.

Usage: python bench/startup.py [--help-runs 10] [--serve-runs 5] [--answer-runs 5] [--ask-after 10]
                               [--install-runs 1] [--partners PATH] [--python PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from tests.e2e.rig import STUB_KEY_ENV, WebLearner, e2e_config  # noqa: E402
from tests.peers.model_stub import ModelStubProcess  # noqa: E402

READY_RE = re.compile(r"(https?://[^\s/]+)")
QUESTION = "What is photosynthesis?"


def time_help(partners: str) -> float:
    began = time.perf_counter()
    subprocess.run([partners, "--help"], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - began


@dataclass
class Served:
    process: subprocess.Popen
    url: str
    began: float
    ready: float
    """Seconds from spawn to the ready line."""
    healthy: float
    """Seconds from spawn to the first ``/healthz`` 200."""
    healthy_at: float
    """``time.perf_counter()`` at that answer."""


def start_serve(partners: str, config: dict, env: dict[str, str] | None = None) -> Served:
    """Spawn ``partners serve`` on ``config`` (a raw config, written to a file beside its data dir); wait for /healthz."""
    path = Path(config["data_dir"]).parent / "partners.yaml"
    path.write_text(yaml.safe_dump(config))
    began = time.perf_counter()
    process = subprocess.Popen([partners, "--config", str(path), "serve", "--port", "0", "--log-level", "warning"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
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
        healthy_at = time.perf_counter()
    except BaseException:
        process.kill()
        process.wait()
        raise
    return Served(process, match.group(1), began, ready, healthy_at - began, healthy_at)


def stop_serve(served: Served) -> None:
    served.process.send_signal(signal.SIGTERM)
    served.process.wait(60)


def time_serve(partners: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        served = start_serve(partners, {
            "data_dir": str(Path(tmp) / "data"),
            "partners": [{"id": "study-buddy", "name": "Study Buddy"}],
            "bindings": [{"partner": "study-buddy", "channel": "webchat", "account": "default"}],
            "channels": {"webchat": {"default": {"access": {"dm": "open"}}}},
        })
        stop_serve(served)
    return served.ready, served.healthy


async def _ask(url: str, delay: float) -> tuple[float, float]:
    """Open a page session, wait ``delay`` s, post the question, follow the events until the answer is final.

    Returns the perf_counter times the post began and the answer's final version arrived."""
    learner = await WebLearner(url).open()
    try:
        await asyncio.sleep(delay)
        asked_at = time.perf_counter()
        await learner.say(QUESTION)
        answered = await learner.wait_for(
            lambda page: [s for s in page.finished() if s.text.startswith("echo:")], timeout=120, what="the answer")
        return asked_at, answered[0].at
    finally:
        await learner.close()


def time_first_answer(partners: str, stub: ModelStubProcess, delay: float) -> tuple[float, float, float]:
    """A fresh serve with a model on the stub, asked ``delay`` s after /healthz answered: (ready, /healthz, wait), in
    seconds, where wait runs from /healthz to the answer when ``delay`` is 0, else from the question to the answer."""
    with tempfile.TemporaryDirectory() as tmp:
        config = e2e_config(Path(tmp) / "data", stub.api_base)
        served = start_serve(partners, config, env={**os.environ, STUB_KEY_ENV: "sk-bench"})
        try:
            asked_at, answered_at = asyncio.run(_ask(served.url, delay))
        finally:
            stop_serve(served)
    return served.ready, served.healthy, answered_at - (served.healthy_at if delay == 0 else asked_at)


def disk_mb(folder: Path) -> float:
    """What ``du`` reports: allocated blocks of every file and folder, each hard link once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for base, _dirs, files in os.walk(folder):
        for name in [".", *files]:  # each folder is counted as the walk reaches it
            stat = os.lstat(os.path.join(base, name))
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_blocks * 512
    return total / 2**20


def time_install(python: str) -> tuple[float, float, float]:
    """``pip install -e .`` of this checkout into a fresh venv with an empty cache: (seconds, venv MB, empty venv MB)."""
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        empty = disk_mb(venv)
        # A copy of the checkout, so the install writes its egg-info there, not into the working tree.
        source = Path(tmp) / "src"
        shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv*", "__pycache__", "*.egg-info"))
        env = {**os.environ, "PIP_CACHE_DIR": str(Path(tmp) / "pip-cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        began = time.perf_counter()
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-e", str(source)],
                       check=True, env=env)
        seconds = time.perf_counter() - began
        return seconds, disk_mb(venv), empty


def main() -> None:
    parser = argparse.ArgumentParser(description="Time partners --help, partners serve start-up and first answer, "
                                                 "and the base install.")
    parser.add_argument("--help-runs", type=int, default=10)
    parser.add_argument("--serve-runs", type=int, default=5)
    parser.add_argument("--answer-runs", type=int, default=5, help="fresh serve processes answering one question each")
    parser.add_argument("--ask-after", type=float, default=10.0,
                        help="seconds after /healthz for the second set of first questions (model library warm by then)")
    parser.add_argument("--install-runs", type=int, default=1, help="fresh venvs (0 to skip the install)")
    parser.add_argument("--partners", default=shutil.which("partners") or str(Path(sys.executable).with_name("partners")))
    parser.add_argument("--python", default=shutil.which("python3") or sys.executable,
                        help="the interpreter that makes the fresh venv (default: python3 on PATH)")
    args = parser.parse_args()

    rows: list[tuple[str, list[float], float, str]] = []
    if args.help_runs:
        time_help(args.partners)  # warm the page cache and bytecode, as a second run would
        rows.append(("partners --help", [time_help(args.partners) for _ in range(args.help_runs)], 0.3, "s"))
    if args.serve_runs:
        serves = [time_serve(args.partners) for _ in range(args.serve_runs)]
        rows.append(("serve: ready line", [r for r, _ in serves], 0.5, "s"))
        rows.append(("serve: /healthz 200", [h for _, h in serves], 0.5, "s"))
    if args.answer_runs:
        stub = ModelStubProcess.start()
        try:
            answers = [time_first_answer(args.partners, stub, 0) for _ in range(args.answer_runs)]
            later = [time_first_answer(args.partners, stub, args.ask_after) for _ in range(args.answer_runs)]
        finally:
            stub.stop()
        rows.append(("model serve: ready", [a[0] for a in answers + later], 0.5, "s"))
        rows.append(("model serve: /healthz", [a[1] for a in answers + later], 0.5, "s"))
        rows.append(("first answer, asked at once", [a[2] for a in answers], 2.0, "s"))
        rows.append((f"first answer, asked at +{args.ask_after:g} s", [a[2] for a in later], 2.0, "s"))
    empties: list[float] = []
    if args.install_runs:
        installs = [time_install(args.python) for _ in range(args.install_runs)]
        empties = [i[2] for i in installs]
        rows.append(("pip install -e . (time)", [i[0] for i in installs], 90.0, "s"))
        rows.append(("pip install -e . (venv)", [i[1] for i in installs], 250.0, "MB"))

    print(f"{'measure':<28} {'runs':>4} {'median':>9} {'min':>9} {'max':>9} {'target':>10}")
    for label, values, target, unit in rows:
        median = statistics.median(values)
        mark = "ok" if median < target else "MISSED"
        print(f"{label:<28} {len(values):>4} {median:>9.3f} {min(values):>9.3f} {max(values):>9.3f} "
              f"{'< ' + format(target, 'g') + ' ' + unit:>10} {mark}")
    if empties:
        print(f"(the empty venv, pip and setuptools only: {statistics.median(empties):.0f} MB)")


if __name__ == "__main__":
    main()
