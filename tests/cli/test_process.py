"""The installed `partners` command as a real process: help, serve with no config, chat."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.waits import HANG_S

PARTNERS = Path(sys.executable).with_name("partners")
"""The console script installed next to the interpreter running the tests."""
TIMEOUT_S = HANG_S


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PARTNERS_CONFIG", "PARTNERS_RESPONDER")}


async def read_until(stream: asyncio.StreamReader, pattern: str) -> str:
    """Lines up to and including the first that matches ``pattern``."""
    seen = ""
    while True:
        line = await asyncio.wait_for(stream.readline(), TIMEOUT_S)
        if not line:
            raise AssertionError(f"output ended before {pattern!r}; got:\n{seen}")
        seen += line.decode()
        if re.search(pattern, line.decode()):
            return seen


def test_help_lists_the_commands(tmp_path):
    result = subprocess.run([PARTNERS, "--help"], capture_output=True, text=True, cwd=tmp_path, env=clean_env(), timeout=TIMEOUT_S)

    assert result.returncode == 0, result.stderr
    for command in ("init", "serve", "chat", "channels", "status", "doctor", "pairing"):
        assert re.search(rf"^\s+{command}\s", result.stdout, re.M), command


@pytest.mark.slow
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
async def test_serve_without_config_runs_study_buddy_and_stops_cleanly(tmp_path, stop_signal):
    log = (tmp_path / "serve.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        PARTNERS, "serve", "--port", "0", cwd=tmp_path, env=clean_env(), stdout=asyncio.subprocess.PIPE, stderr=log,
    )
    try:
        seen = await read_until(proc.stdout, r"Partners Gateway is running")
        assert "No config file: using the embedded default" in seen
        url = re.search(r"open (http://127\.0\.0\.1:\d+/) to chat with Study Buddy$", seen, re.M).group(1)
        async with httpx.AsyncClient() as client:
            health = await client.get(url + "healthz")
            page = await client.get(url, follow_redirects=True)
        assert health.status_code == 200
        assert page.status_code == 200 and page.url.path == "/channels/webchat/default/"
        assert (tmp_path / "partners-data" / "gateway.db").is_file()

        status = await run_partners("status", "--url", url, cwd=tmp_path)
        assert status.returncode == 0, status.stderr
        assert re.search(r"^webchat\s+default\s+\S+", status.stdout, re.M), status.stdout

        port = url.rsplit(":", 1)[1].rstrip("/")
        (tmp_path / "probe.yaml").write_text(f"http: {{port: {port}}}\n", encoding="utf-8")
        doctor = await run_partners("-c", "probe.yaml", "doctor", "--offline", cwd=tmp_path)
        assert (f"ok     http port: 127.0.0.1:{port} is served by the Partners Gateway of this data dir "
                f"({tmp_path / 'partners-data'}): it is running") in doctor.stdout

        # A second serve on this data dir and port is told the gateway already runs, not "address in use".
        again = await run_partners("-c", "probe.yaml", "serve", cwd=tmp_path)
        assert again.returncode == 1
        assert f"error: a Partners Gateway on this data dir is already running at http://127.0.0.1:{port}" in again.stderr
        assert "`partners status` shows it" in again.stderr

        # A gateway on another data dir wanting the same port is told another gateway holds it.
        (tmp_path / "other.yaml").write_text(f"data_dir: other-data\nhttp: {{port: {port}}}\n", encoding="utf-8")
        doctor = await run_partners("-c", "other.yaml", "doctor", "--offline", cwd=tmp_path)
        assert f"error  http port: 127.0.0.1:{port} is in use by another Partners Gateway, one with another data dir" in doctor.stdout
        other = await run_partners("-c", "other.yaml", "serve", cwd=tmp_path)
        assert other.returncode == 1
        assert f"error: 127.0.0.1:{port} is in use by another Partners Gateway, one with another data dir" in other.stderr
        assert "give this one a free port" in other.stderr

        proc.send_signal(stop_signal)
        assert await asyncio.wait_for(proc.wait(), TIMEOUT_S) == 0
        rest = (await proc.stdout.read()).decode()
        assert rest.strip().endswith("Partners Gateway stopped.")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        log.close()
    assert "Traceback" not in (tmp_path / "serve.log").read_text(encoding="utf-8")


def test_serve_on_a_busy_port_says_so_and_exits_1(invoke, workdir):
    with socket.create_server(("127.0.0.1", 0)) as busy:  # listening, but no gateway answers there
        port = busy.getsockname()[1]
        result = invoke("serve", "--port", str(port))

    assert result.exit_code == 1
    assert f"error: 127.0.0.1:{port} is in use by another program" in result.stderr
    assert result.stderr.rstrip().endswith("(fix: stop it, or set http.port (or serve --port) to a free port)")
    assert "Traceback" not in result.output


@pytest.mark.slow
async def test_chat_talks_to_the_partner_in_the_terminal_until_quit(tmp_path):
    log = (tmp_path / "chat.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        PARTNERS, "chat", cwd=tmp_path, env=clean_env(),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
    )
    try:
        await read_until(proc.stdout, r"^Talking to Study Buddy \(study-buddy\)\. Type /quit")
        proc.stdin.write(b"what is photosynthesis?\n")
        await proc.stdin.drain()
        # With no model configured the partner answers from its study notes and says so.
        reply = await read_until(proc.stdout, r"light energy")
        assert "No language model is configured" in reply
        proc.stdin.write(b"/quit\n")
        await proc.stdin.drain()
        assert await asyncio.wait_for(proc.wait(), TIMEOUT_S) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        log.close()
    assert "Traceback" not in (tmp_path / "chat.log").read_text(encoding="utf-8")
    assert (tmp_path / "partners-data" / "gateway.db").is_file()


@pytest.mark.slow
async def test_chat_ends_when_input_ends(tmp_path):
    proc = await asyncio.create_subprocess_exec(
        PARTNERS, "chat", cwd=tmp_path, env=clean_env(),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    proc.stdin.close()
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT_S)

    assert proc.returncode == 0, err.decode()
    assert out.decode().startswith("Talking to Study Buddy")


async def run_partners(*args: str, cwd: Path, stdin: bytes | None = None,
                       env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = await asyncio.create_subprocess_exec(
        PARTNERS, *args, cwd=cwd, env=env or clean_env(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), TIMEOUT_S)
    return subprocess.CompletedProcess(args, proc.returncode, out.decode(), err.decode())


# --------------------------------------------------------------------------- piped input gets its answers


NO_DRAIN = {"pipeline": {"shutdown_drain_s": 0}}
"""Stopping does not wait for running answers, so only the chat's own wait gets them printed
(with the default 10 s drain an answer sometimes made it out by luck)."""


@pytest.mark.slow
async def test_piped_chat_prints_the_notes_answer_before_it_leaves(tmp_path):
    import yaml

    (tmp_path / "partners.yaml").write_text(yaml.safe_dump({
        "partners": [{"id": "study-buddy", "name": "Study Buddy"}], **NO_DRAIN}), encoding="utf-8")

    chat = await run_partners("chat", cwd=tmp_path, stdin=b"what is photosynthesis?\n")

    assert chat.returncode == 0, chat.stderr
    assert "No language model is configured" in chat.stdout
    assert "light energy" in chat.stdout
    assert "Traceback" not in chat.stderr


@pytest.mark.slow
async def test_piped_chat_waits_for_a_slow_model_answer_to_finish(tmp_path):
    import yaml

    from tests.peers.model_stub import ModelStubProcess, Reply

    answer = "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen."
    stub = ModelStubProcess.start()
    try:
        stub.script(Reply.text(answer, chunk=4, pause=0.05, delay=1.0))  # still streaming long after stdin closed
        (tmp_path / "partners.yaml").write_text(yaml.safe_dump({
            "data_dir": "data",
            "partners": [{"id": "tutor", "name": "Tutor", "model": {
                "model": "openai/stub-model", "api_base": stub.api_base, "api_key": "env:PARTNERS_TEST_STUB_KEY"}}],
            **NO_DRAIN,
        }), encoding="utf-8")

        chat = await run_partners("chat", cwd=tmp_path, stdin=b"what is photosynthesis?\n",
                                  env={**clean_env(), "PARTNERS_TEST_STUB_KEY": "sk-stub"})

        assert chat.returncode == 0, chat.stderr
        assert chat.stdout.startswith("Talking to Tutor (tutor).")
        assert answer in chat.stdout
        assert any("what is photosynthesis?" in str(request["messages"]) for request in stub.requests())
    finally:
        stub.stop()


# --------------------------------------------------------------------------- a persona typo stops serve


@pytest.mark.slow
async def test_serve_with_a_misspelt_persona_stops_with_the_error_and_fix_doctor_prints(tmp_path):
    (tmp_path / "class.yaml").write_text(
        "partners:\n  - {id: algebra, name: Algebra Coach, persona: socratic-maths}\n"
        "bindings:\n  - {partner: algebra, channel: webchat}\n"
        "channels:\n  webchat:\n    default: {access: {dm: open}}\n", encoding="utf-8")

    doctor = await run_partners("doctor", "--config", "class.yaml", cwd=tmp_path)
    serve = await run_partners("serve", "--config", "class.yaml", "--port", "0", cwd=tmp_path)

    problem = re.search(r"^error  partner algebra: persona: (.+)\n\s+fix: (.+)$", doctor.stdout, re.M)
    assert problem, doctor.stdout
    message, fix = problem.groups()
    assert "did you mean socratic-math?" in fix
    assert serve.returncode == 2, serve.stdout + serve.stderr
    assert serve.stderr.strip() == f"error: class.yaml:partners.0.persona: {message} (fix: {fix})"
    assert "Partners Gateway is running" not in serve.stdout  # never bound, so no learner reaches it
    assert "Traceback" not in serve.stderr
