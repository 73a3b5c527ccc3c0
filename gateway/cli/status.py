"""``partners status`` and ``partners doctor``: how a running gateway stands, and whether a setup can work."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from gateway.cli.group import cli, config_of, format_table

if TYPE_CHECKING:  # pragma: no cover - typing only
    from gateway.core.config import Config
    from gateway.status import StatusReport


# --------------------------------------------------------------------------- status


def base_url(config: Config) -> str:
    from gateway.doctor import client_host

    if config.http.public_url:
        return config.http.public_url.rstrip("/")
    return f"http://{client_host(config.http.host)}:{config.http.port}"


def format_status(report: StatusReport, url: str) -> str:
    header = (
        f"Partners Gateway {report.version} at {url}, running since {report.started_at:%Y-%m-%d %H:%M:%S %Z}".rstrip()
        + f"\nresponder: {report.responder}; partners: {', '.join(report.partners) or 'none'}"
    )
    rows = [
        (a.channel, a.account, a.state, str(a.restarts), str(a.inbound_pending), str(a.inbound_held), str(a.outbox_open), a.reason)
        for a in report.accounts
    ]
    headers = ("CHANNEL", "ACCOUNT", "STATE", "RESTARTS", "PENDING", "HELD", "OUTBOX", "REASON")
    table = format_table(headers, rows) if rows else "no channel accounts running"
    lines = [header, "", table]
    short = [a for a in report.accounts if a.undelivered]
    if short:
        lines += ["", "not delivered whole since start:"] + [
            f"  {a.channel}/{a.account}: {a.undelivered} replies, the last because {a.last_undelivered}" for a in short]
    if report.unavailable:
        lines += ["", "not running:"] + [f"  {u.channel}/{u.account}: {u.reason}" for u in report.unavailable]
    if report.models:
        models = [
            (m.partner, m.model or "-", m.backup or "-", m.state, f"{m.since:%Y-%m-%d %H:%M:%S %Z}".strip() if m.since else "-",
             f"{m.kind}: {m.reason}" if m.kind else m.reason)
            for m in report.models
        ]
        lines += ["", format_table(("PARTNER", "MODEL", "BACKUP", "STATE", "SINCE", "REASON"), models)]
    if report.http is not None:
        h = report.http
        lines += ["", f"http: {h.connections} of {h.max_connections} connections, {h.streams} of {h.max_streams} streams "
                      f"({h.max_streams_per_address} per address); refused {h.refused_connections} connections, "
                      f"{h.refused_streams} streams; {h.header_timeouts} header timeouts ({h.header_timeout_s:g} s); "
                      f"open files limit {h.open_files_limit if h.open_files_limit is not None else '-'}"]
    return "\n".join(lines)


STATUS_PROBLEMS_EXIT = 3
"""``partners status`` exit status while an account or a model is in error (1: no gateway answers; 2: bad config)."""


@cli.command()
@click.option("--url", help="The gateway's address (default: http.public_url, else http://host:port from the config).")
@click.pass_context
def status(ctx: click.Context, url: str | None) -> None:
    """Show what the running gateway is doing: accounts, models, states, queue depths.

    Exit 0 when all is well, 3 while an account or a model is in error, 1 when no gateway answers."""
    import httpx
    from pydantic import ValidationError

    from gateway.status import StatusReport

    url = (url or base_url(config_of(ctx, resolve_secrets=False))).rstrip("/")
    try:
        response = httpx.get(f"{url}/status", timeout=5.0)
    except httpx.HTTPError:
        click.echo(f"No Partners Gateway is answering at {url} (start one with `partners serve`).", err=True)
        ctx.exit(1)
    if response.status_code != 200:
        click.echo(f"{url}/status answered HTTP {response.status_code}; is a Partners Gateway running there?", err=True)
        ctx.exit(1)
    try:
        report = StatusReport.model_validate_json(response.content)
    except ValidationError:
        click.echo(f"{url}/status did not answer like a Partners Gateway.", err=True)
        ctx.exit(1)
    click.echo(format_status(report, url))
    problems = report.problems()
    if problems:
        click.echo("\nneeds attention:\n" + "\n".join(f"  {line}" for line in problems), err=True)
        ctx.exit(STATUS_PROBLEMS_EXIT)


# --------------------------------------------------------------------------- doctor


@cli.command()
@click.option("--offline", is_flag=True, help="Check only the shape of the settings; ask no platform and no model.")
@click.pass_context
def doctor(ctx: click.Context, offline: bool) -> None:
    """Check the config, data dir, port, channels, bindings and models; print each problem with its fix.

    Without --offline, each channel account and each partner's model is asked whether its settings work
    (Telegram getMe, an IMAP and SMTP login, Matrix whoami, a one-token model request), all at once."""
    from gateway.defaults import load
    from gateway.doctor import Severity, run_checks

    results = run_checks(lambda: load(ctx.obj), offline=offline)
    for result in results:
        click.echo(f"{result.severity.value:<6} {result.name}: {result.message}")
        if result.fix and result.severity is not Severity.OK:
            click.echo(f"       fix: {result.fix}")
    errors = sum(r.severity is Severity.ERROR for r in results)
    warnings = sum(r.severity is Severity.WARN for r in results)
    click.echo(f"\n{errors} error(s), {warnings} warning(s)")
    if errors:
        ctx.exit(1)


