"""No route, command or file name reaches outside where it belongs: nothing outside is served, written or removed.

Over HTTP, every route that takes a path or a segment -- the webhooks, a
channel's own routes, the web chat's static files and its API, the admin API's
partner and identity -- gets ``../`` in its plain, encoded, double-encoded,
backslash, absolute and NUL-byte forms, sent byte for byte (a normalizing
client would hide them).  Sentinel files sit in the data dir and beside it; no
answer may carry one, none may be a 500, and no file appears or disappears
outside the data dir's own databases.  On disk, the names learners and
teachers choose -- knowledge files for ``partners kb add``, attachment names
on email and Telegram -- stay inside their folder.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from brain.knowledge.ingest import doc_id_for
from channels._kit.media import safe_name
from channels.webchat.api import STATIC_DIR
from gateway.app import Gateway
from gateway.cli import cli
from gateway.configfile import parse_config
from tests.e2e.rig import served as served_http
from tests.security.probes.raw_http import raw_request

TOKEN = "admin-token-for-the-traversal-probe"
SENTINEL = "SENTINEL-OUTSIDE-THE-SERVED-TREE"
READABLE = ("root:x:0:0", "from __future__", SENTINEL, "[tool.pytest", "admin_token")
"""What a served file outside the static tree would show: /etc/passwd, Python source, the sentinels, config."""


def payloads(outside: Path, inside_data: Path) -> list[str]:
    """A path segment's worth of ways up and out, aimed at /etc/passwd, the source tree and the sentinels."""
    up = os.path.relpath(outside, STATIC_DIR)
    data_up = os.path.relpath(inside_data, STATIC_DIR)
    forms = ["../../../../../../etc/passwd", "../api.py", "../../../gateway/config.py", "../../../pyproject.toml",
             up, data_up]
    spelled: list[str] = []
    for form in forms:
        spelled += [form, form.replace("/", "%2f"), form.replace("..", "%2e%2e"), form.replace("..", "%2e%2e").replace("/", "%2f"),
                    form.replace("/", "%252f").replace("..", "%252e%252e"), form.replace("/", "\\"), form.replace("/", "%5c"),
                    form.replace("../", "....//"), form.replace("../", "..;/")]
    return [*spelled, str(outside), str(outside).replace("/", "%2f"), "/etc/passwd", "%2fetc%2fpasswd",
            "app.js%00.png", "..%00/..%00/etc/passwd", "%00", "..", ".", "%2e%2e", "%2e"]


@dataclass
class Served:
    host: str
    port: int
    gateway: Gateway
    data_dir: Path
    outside: Path
    inside: Path


@pytest.fixture
async def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    monkeypatch.setenv("TRAVERSAL_ADMIN_TOKEN", TOKEN)
    data = tmp_path / "data"
    config = parse_config({
        "data_dir": str(data),
        "partners": [{"id": "tutor", "name": "Tutor"}],
        "bindings": [{"partner": "tutor", "channel": "webchat", "account": "default"}],
        "channels": {"webchat": {"default": {"access": {"dm": "open", "allow_from": ["*"]}}}},
        "http": {"admin_token": "env:TRAVERSAL_ADMIN_TOKEN"},
        "pipeline": {"coalesce_window_s": 0, "shutdown_drain_s": 1},
    })
    async with Gateway(config) as gateway:  # its own brain: the admin routes reach its memory controls
        outside, inside = tmp_path / "outside-sentinel.txt", data / "inside-sentinel.txt"
        outside.write_text(SENTINEL)
        inside.write_text(SENTINEL)
        async with served_http(gateway) as url:
            host, port = url.removeprefix("http://").rsplit(":", 1)
            yield Served(host, int(port), gateway, data, outside, inside)


def files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def targets(payload: str) -> list[tuple[str, str]]:
    """Every route that takes a segment, with ``payload`` in that segment."""
    web = "/channels/webchat/default"
    learner = "webchat:default:ann"
    return [
        ("GET", f"{web}/static/{payload}"),
        ("GET", f"{web}/static/css/{payload}"),
        ("GET", f"{web}/{payload}"),
        ("GET", f"/channels/{payload}/default/static/app.js"),
        ("GET", f"/channels/webchat/{payload}/static/app.js"),
        ("POST", f"/webhooks/{payload}/default"),
        ("POST", f"/webhooks/webchat/{payload}"),
        ("GET", f"{web}/api/events?session={payload}"),
        ("GET", f"/api/v1/partners/{payload}/learners/{learner}/memory"),
        ("GET", f"/api/v1/partners/tutor/learners/{payload}/memory"),
        ("GET", f"/api/v1/partners/tutor/learners/webchat:default:{payload}/memory.md"),
        ("PUT", f"/api/v1/partners/tutor/learners/webchat:{payload}:ann/memory"),
        ("DELETE", f"/api/v1/partners/tutor/learners/{payload}:default:ann/memory"),
        ("GET", f"/{payload}"),
    ]


async def test_no_route_serves_writes_or_removes_anything_outside(served: Served) -> None:
    before = files(served.outside.parent)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    # Positive controls: the raw client reaches the static tree, and the admin token is accepted.
    script = await raw_request(served.host, served.port, "GET", "/channels/webchat/default/static/app.js")
    assert script.status == 200 and b"textContent" in script.body
    nobody = await raw_request(served.host, served.port, "GET", "/api/v1/partners/tutor/learners/webchat:default:nobody/memory",
                               headers=headers)
    assert nobody.status == 404 and b"has not written" in nobody.body
    body = b'{"markdown": "# overwritten"}'
    problems: list[str] = []
    count = 0
    for payload in payloads(served.outside, served.inside):
        for method, target in targets(payload):
            answer = await raw_request(served.host, served.port, method, target, headers=headers,
                                       body=body if method in ("PUT", "POST") else b"")
            count += 1
            shown = [marker for marker in READABLE if marker.encode() in answer.body]
            if shown or answer.status >= 500 or answer.status == 0:
                problems.append(f"{method} {target} -> {answer.status} {shown}")
    assert problems == [], "\n".join(problems)
    assert count > 700
    appeared = {p for p in files(served.outside.parent) - before
                if not (p.parent == served.data_dir and (p.suffix == ".db" or p.name.endswith(("-wal", "-shm"))))}
    assert appeared == set() and before <= files(served.outside.parent)


async def test_the_web_chat_api_refuses_a_session_or_message_id_that_is_a_path(served: Served) -> None:
    api = "/channels/webchat/default/api/messages"
    good_session = "s" * 30
    for payload in ("../../etc/passwd", "..%2f..", "a/b", "..\\..", "/abs", "x\x00y", ".."):
        # The session is the cookie's value: a path there is no session at all.
        cookie = payload.replace("\x00", "%00")
        answer = await raw_request(served.host, served.port, "POST", api,
                                   headers={"Content-Type": "application/json", "Cookie": f"partners_webchat={cookie}"},
                                   body=b'{"message_id": "m1", "text": "hi"}')
        assert answer.status == 401 and b'"error"' in answer.body, (payload, answer)
        # A message id that is a path, from a real session, is a bad request.
        text = f'{{"message_id": "{payload}", "text": "hi"}}'.replace("\x00", "\\u0000")
        answer = await raw_request(served.host, served.port, "POST", api,
                                   headers={"Content-Type": "application/json", "Cookie": f"partners_webchat={good_session}"},
                                   body=text.encode())
        assert answer.status == 400 and b'"error"' in answer.body, (payload, answer)


# --------------------------------------------------------------------------- names chosen by learners and teachers

NAMES = ["../../etc/passwd", "..\\..\\windows\\system32\\evil.dll", "/etc/cron.d/evil", "a/../../b.md", "..", ".",
         "evil\x00.md", "%2e%2e%2fevil.md", "....//evil.md", " ../evil.md", "C:\\evil.md", "~/.ssh/authorized_keys"]


@pytest.mark.parametrize("name", NAMES)
def test_an_attachment_name_from_any_channel_is_only_a_name(name: str, tmp_path: Path) -> None:
    """Every channel cleans a sender's file name with the kit (files themselves are kept by hash in the
    blob store, so a name never becomes a path; this holds for whoever writes one to disk anyway)."""
    folder = (tmp_path / "media").resolve()
    kept = safe_name(name)
    path = folder / kept
    assert path.resolve().parent == folder and "\x00" not in kept and not kept.startswith("."), kept
    assert len(kept.encode()) <= 255


@pytest.mark.parametrize("name", NAMES)
def test_a_knowledge_file_name_becomes_an_id_without_a_path_in_it(name: str) -> None:
    doc = doc_id_for(Path(name.replace("\x00", "")))
    assert "/" not in doc and "\\" not in doc and not doc.startswith(".") and doc, doc


def test_kb_commands_refuse_a_partner_that_is_a_path_and_remove_nothing_outside(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PARTNERS_CONFIG", raising=False)
    config = tmp_path / "partners.yaml"
    config.write_text(yaml.safe_dump({"data_dir": "data", "partners": [{"id": "tutor", "name": "Tutor"}]}))
    (tmp_path / "victim.md").write_text("# Victim\n\nThis file must survive.\n")
    course = tmp_path / "..-..-evil.md"
    course.write_text("# Course\n\nFriction slows a sliding block.\n")
    runner = CliRunner()

    def kb(*args: str) -> tuple[int, str]:
        result = runner.invoke(cli, ["-c", str(config), "kb", *args], prog_name="partners")
        assert "Traceback" not in result.output, result.output
        return result.exit_code, result.output

    before = files(tmp_path)
    for partner in ("../../evil", "..", "tutor/../..", "/tmp/evil", "tutor\\..\\..", "tutor%2f.."):
        code, output = kb("add", partner, str(course))
        assert code != 0 and "tutor" in output, (partner, output)
    assert files(tmp_path) == before and not (tmp_path / "data" / "knowledge").exists()

    code, output = kb("add", "tutor", str(course))
    assert code == 0, output
    for doc in ("../../victim.md", "../victim.md", str(tmp_path / "victim.md"), "..", "*"):
        kb("rm", "tutor", doc)
    assert (tmp_path / "victim.md").read_text().startswith("# Victim") and course.exists()
    data, knowledge = tmp_path / "data", tmp_path / "data" / "knowledge"
    written = files(tmp_path) - before  # the tutor's knowledge, and the brain's own files the CLI opens (its notes index)
    assert {p for p in written if not p.is_relative_to(data)} == set()
    assert {p for p in written if p.is_relative_to(knowledge) and not p.is_relative_to(knowledge / "tutor")} == set()
