"""The image in deploy/Dockerfile, built here and run: its health check passes and its web chat answers.

The build is offline as the Dockerfile documents for such machines: the wheels are made on the
host for the base image's Python (Debian's python3, the one the debootstrap image carries) and
the build installs only from them.  The container runs the embedded default partner, which
answers from its study notes without a model, on a free loopback port of the host network.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.deploy.podman import BUILD_S, base_image, conf_file, podman
from tests.e2e.rig import WebLearner
from tests.waits import HANG_S

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/partners-gateway:test"
WHEELS = ROOT / "deploy" / "wheels"
BASE_PYTHON = "/usr/bin/python3"
"""Debian bookworm's python3, the same version the debootstrap base image has: the wheels are resolved for it."""

pytestmark = pytest.mark.timeout(2 * BUILD_S)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build_wheels() -> None:
    """Every wheel the install needs, setuptools included (the build backend), for the base image's Python."""
    made = subprocess.run([sys.executable, "-m", "pip", "--python", BASE_PYTHON, "wheel", "--quiet", "-w", str(WHEELS),
                           f"{ROOT}[postgresql]", "setuptools"], capture_output=True, text=True, timeout=BUILD_S,
                          check=False)
    assert made.returncode == 0, made.stderr[-4000:]
    for own in WHEELS.glob("partners_gateway-*.whl"):
        own.unlink()  # the image builds the project from the source it copies, as a user's build does


@pytest.fixture(scope="module")
def conf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return conf_file(tmp_path_factory.mktemp("podman"))


@pytest.fixture(scope="module")
def image(conf: Path) -> Iterator[str]:
    base = base_image(conf)
    build_wheels()
    try:
        podman(conf, "build", "--network", "host", "--format", "docker", "-f", str(ROOT / "deploy" / "Dockerfile"),
               "--build-arg", f"BASE_IMAGE={base}", "--build-arg", "PIP_NO_INDEX=1", "-t", IMAGE, str(ROOT))
    finally:
        for wheel in WHEELS.glob("*.whl"):
            wheel.unlink()
    yield IMAGE
    podman(conf, "image", "prune", "--force", check=False)


@pytest.fixture
def running(conf: Path, image: str) -> Iterator[tuple[str, str]]:
    """(container name, base URL) of the image running with its defaults but a free port on loopback."""
    port = free_port()
    name = f"partners-test-{port}"
    podman(conf, "run", "--detach", "--name", name, "--network", "host", "--env", "PARTNERS_HOST=127.0.0.1",
           "--env", f"PARTNERS_PORT={port}", image)
    try:
        yield name, f"http://127.0.0.1:{port}"
    finally:
        podman(conf, "rm", "--force", "--time", "10", name, check=False)


async def healthz(url: str) -> dict[str, object]:
    """``/healthz``'s answer once it is 200 (the gateway is serving), bounded by :data:`HANG_S`."""
    deadline = time.monotonic() + HANG_S
    async with httpx.AsyncClient(timeout=5, trust_env=False) as http:
        while time.monotonic() < deadline:
            try:
                answer = await http.get(f"{url}/healthz")
                if answer.status_code == 200:
                    return dict(answer.json())
            except httpx.HTTPError:
                pass
            await asyncio.sleep(1)
    return {}


def container_logs(conf: Path, name: str) -> str:
    logs = podman(conf, "logs", name, check=False)
    return f"{logs.stdout[-3000:]}\n{logs.stderr[-3000:]}"


def test_podman_and_its_tools_are_here() -> None:
    missing = [tool for tool in ("podman", "runc", "debootstrap") if shutil.which(tool) is None
               and not Path(f"/usr/sbin/{tool}").exists()]
    assert not missing, f"{missing} missing: `bash deploy/test.sh` installs them"


def test_the_image_runs_as_a_plain_user_with_a_data_volume(conf: Path, image: str) -> None:
    shown = podman(conf, "image", "inspect", "--format", "{{.Config.User}} {{json .Config.Volumes}} {{.Config.Healthcheck.Test}}",
                   image).stdout
    user, volumes, check = shown.split(" ", 2)
    assert user.split(":")[0] not in ("", "0", "root"), shown
    assert "/var/lib/partners" in volumes, shown
    assert "/healthz" in check, shown


async def test_the_container_is_healthy_and_its_web_chat_answers(conf: Path, running: tuple[str, str]) -> None:
    name, url = running
    health = await healthz(url)
    assert health.get("ok") is True, f"the container never answered /healthz:\n{container_logs(conf, name)}"
    assert podman(conf, "healthcheck", "run", name, check=False).returncode == 0, "the image's own HEALTHCHECK failed"
    learner = await WebLearner(url).open()
    try:
        await learner.say("What should I revise first for my exam?")
        answered = await learner.wait_for(lambda page: [shown for shown in page.finished() if shown.text],
                                          what="the partner's answer")
        assert answered[0].text
    finally:
        await learner.close()
