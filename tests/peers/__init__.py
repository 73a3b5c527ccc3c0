"""Loopback peers: one emulated or real platform per channel, started by the tests.

Each peer runs in its own process on 127.0.0.1 and is stopped by its process id.
"""

import subprocess


def stop_process(process: subprocess.Popen) -> None:
    """End a peer process: terminate, wait briefly, kill if it ignores us; close its pipe."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stdout:
        process.stdout.close()
