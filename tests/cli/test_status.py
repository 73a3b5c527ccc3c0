"""`partners status`: what the running gateway reports, or a clear message when none runs."""

from __future__ import annotations

import socket
from datetime import UTC, datetime

from gateway.cli.status import base_url, format_status
from gateway.configfile import parse_config
from gateway.status import AccountStatus, StatusReport, UnavailableChannel


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_nothing_running_is_a_clear_message_and_exit_1(invoke, workdir):
    port = free_port()
    (workdir / "partners.yaml").write_text(f"http: {{port: {port}}}\n", encoding="utf-8")

    result = invoke("status")

    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"No Partners Gateway is answering at http://127.0.0.1:{port} (start one with `partners serve`)."
    )


def test_the_address_comes_from_public_url_else_host_and_port():
    assert base_url(parse_config({"http": {"public_url": "https://tutor.example.org/"}})) == "https://tutor.example.org"
    assert base_url(parse_config({"http": {"host": "0.0.0.0", "port": 9000}})) == "http://127.0.0.1:9000"
    assert base_url(parse_config({"http": {"host": "::", "port": 9000}})) == "http://[::1]:9000"


def test_the_report_shows_each_account_with_state_reason_and_queues():
    report = StatusReport(
        version="0.1.0",
        started_at=datetime(2025, 3, 1, 8, 30, tzinfo=UTC),
        partners=["study-buddy", "algebra-coach"],
        accounts=[
            AccountStatus(channel="webchat", account="default", state="running", inbound_pending=2, outbox_open=1),
            AccountStatus(channel="relay", account="class-7b", state="backoff", reason="peer unavailable", restarts=3,
                          inbound_held=4),
        ],
        unavailable=[UnavailableChannel(channel="telegram", account="default", reason="needs the telegram extra")],
        responder="stand-in",
    )

    text = format_status(report, "http://127.0.0.1:8780")

    lines = text.splitlines()
    assert lines[0] == "Partners Gateway 0.1.0 at http://127.0.0.1:8780, running since 2025-03-01 08:30:00 UTC"
    assert lines[1] == "responder: stand-in; partners: study-buddy, algebra-coach"
    assert lines[3].split() == ["CHANNEL", "ACCOUNT", "STATE", "RESTARTS", "PENDING", "HELD", "OUTBOX", "REASON"]
    assert lines[4].split() == ["webchat", "default", "running", "0", "2", "0", "1"]
    assert lines[5].split() == ["relay", "class-7b", "backoff", "3", "0", "4", "0", "peer", "unavailable"]
    assert lines[-2:] == ["not running:", "  telegram/default: needs the telegram extra"]


def test_each_partners_model_is_shown_and_what_is_in_error_is_listed():
    from gateway.status import ModelStatus

    since = datetime(2025, 3, 1, 9, 15, tzinfo=UTC)
    report = StatusReport(
        version="0.1.0", started_at=since, partners=["buddy", "coach", "quiet"], responder="brain",
        accounts=[
            AccountStatus(channel="webchat", account="default", state="running"),
            AccountStatus(channel="telegram", account="main", state="action_required", reason="telegram says 401"),
        ],
        unavailable=[],
        models=[
            ModelStatus(partner="buddy", model="openai/gpt-4o-mini", backup="ollama/llama3", state="failing",
                        kind="timeout", reason="no answer began within first_token_timeout_s (15 s)", since=since,
                        failures=4),
            ModelStatus(partner="coach", model="ollama/llama3", state="ok", since=since),
            ModelStatus(partner="quiet", state="none", reason="no model configured: it answers from its notes"),
        ],
    )

    lines = format_status(report, "http://127.0.0.1:8780").splitlines()

    table = lines[lines.index(next(line for line in lines if line.startswith("PARTNER"))):]
    assert table[0].split() == ["PARTNER", "MODEL", "BACKUP", "STATE", "SINCE", "REASON"]
    assert table[1].split()[:6] == ["buddy", "openai/gpt-4o-mini", "ollama/llama3", "failing", "2025-03-01", "09:15:00"]
    assert table[1].endswith("timeout: no answer began within first_token_timeout_s (15 s)")
    assert table[2].split()[:4] == ["coach", "ollama/llama3", "-", "ok"]
    assert table[3].split()[:5] == ["quiet", "-", "-", "none", "-"]
    assert report.problems() == [
        "telegram/main is action_required: telegram says 401",
        "partner buddy's model openai/gpt-4o-mini is failing: no answer began within first_token_timeout_s (15 s)",
    ]


def test_a_report_with_nothing_in_error_has_no_problems():
    report = StatusReport(version="0.1.0", started_at=datetime(2025, 3, 1, tzinfo=UTC), partners=[],
                          accounts=[AccountStatus(channel="webchat", account="default", state="running")],
                          unavailable=[], responder="notes")
    assert report.problems() == []


def test_replies_that_did_not_arrive_whole_are_listed_with_the_last_reason():
    report = StatusReport(
        version="0.1.0", started_at=datetime(2025, 3, 1, 8, 30, tzinfo=UTC), partners=["coach"], responder="brain",
        accounts=[AccountStatus(channel="qq", account="main", state="running", undelivered=2,
                                last_undelivered="2 of 7 text parts left out: qq takes 5 messages in answer to one message"),
                  AccountStatus(channel="webchat", account="default", state="running")],
        unavailable=[],
    )

    lines = format_status(report, "http://127.0.0.1:8780").splitlines()

    at = lines.index("not delivered whole since start:")
    assert lines[at + 1] == ("  qq/main: 2 replies, the last because 2 of 7 text parts left out: "
                             "qq takes 5 messages in answer to one message")
    assert not any("webchat/default:" in line for line in lines)
