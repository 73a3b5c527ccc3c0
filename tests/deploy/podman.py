"""The podman settings that work on this machine kind, in one place for every container test.

There is no image registry here, so the base image is made from Debian's own packages
(``debootstrap`` into a folder, ``podman import``) once and reused by its tag.  crun fails on
``setrlimit`` and on hybrid cgroups, so every call runs with runc and a containers.conf that
clears the default ulimits and uses cgroupfs.  Builds and runs use the host network: the
machine has none to give a container, and the gateway is reached over loopback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

BASE_IMAGE = "localhost/debian-base:bookworm"
SUITE = "bookworm"
BUILD_S = 900
"""Bounds a hang of one build step (debootstrap, pip inside the build) on a loaded 2-core machine."""
CONTAINERS_CONF = """\
[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
"""


def conf_file(folder: Path) -> Path:
    path = folder / "containers.conf"
    path.write_text(CONTAINERS_CONF, encoding="utf-8")
    return path


def env(conf: Path) -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def podman(conf: Path, *args: str, timeout: float = BUILD_S, check: bool = True) -> subprocess.CompletedProcess[str]:
    """One podman command with runc; a failure shows podman's own output."""
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed: `bash deploy/test.sh` installs podman, runc and debootstrap", pytrace=False)
    done = subprocess.run(["podman", "--runtime", "runc", *args], env=env(conf), capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check and done.returncode != 0:
        pytest.fail(f"podman {' '.join(args[:2])} failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}",
                    pytrace=False)
    return done


def mirror() -> str:
    """The Debian mirror apt uses here: debootstrap fetches from the same (the only one reachable)."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.is_file():
        for line in sources.read_text(encoding="utf-8").splitlines():
            if line.startswith("URIs:"):
                return line.split()[1]
    return "http://deb.debian.org/debian"


def base_image(conf: Path) -> str:
    """The debootstrap base image's tag, built and imported on first use (about a minute here)."""
    if podman(conf, "image", "exists", BASE_IMAGE, check=False).returncode == 0:
        return BASE_IMAGE
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    with tempfile.TemporaryDirectory(prefix="debian-base-") as folder:
        rootfs = Path(folder) / "rootfs"
        made = subprocess.run([debootstrap, "--variant=minbase", "--include=python3,python3-venv", SUITE, str(rootfs),
                               mirror()], capture_output=True, text=True, timeout=BUILD_S, check=False)
        if made.returncode != 0:
            pytest.fail(f"debootstrap failed ({made.returncode}):\n{made.stdout[-3000:]}\n{made.stderr[-3000:]}",
                        pytrace=False)
        archive = Path(folder) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(archive), "."], check=True, timeout=BUILD_S)
        podman(conf, "import", str(archive), BASE_IMAGE)
    return BASE_IMAGE
