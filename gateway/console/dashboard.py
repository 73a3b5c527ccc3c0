"""The console's dashboard: messages in and out, answer latency, drops and errors, model use -- over
the last day (a bar an hour) or week (a bar a day), per partner and channel account.

=============================================  ====  ==================================================
route                                          verb  viewer -> answer
=============================================  ====  ==================================================
``/console/dashboard?span=day|week``           GET   signed in 200; another span 400
``/console/api/dashboard?span=day|week``       GET   signed in 200, the same numbers as JSON; stranger 401
=============================================  ====  ==================================================

The numbers are the store's hourly sums (:mod:`gateway.activity`), so they survive a restart.  An
administrator sees every row; a teacher the rows of their own partners (what was counted on an
account bound to one of them, and their partners' model errors and use) -- counts on an account
bound to no partner, or bound per chat, are an administrator's only.  Charts are inline SVG.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.activity import SPANS, ModelUse, Summary, summarize
from gateway.console.access import Viewer
from gateway.console.charts import Chart, bar_chart
from gateway.console.openapi import Operation, describe
from gateway.console.pages import Console
from gateway.console.services import ConsoleGateway
from gateway.http.responses import error_response
from gateway.store.console import ConsoleSession


class SpanQuery(BaseModel):
    span: Literal["day", "week"] = "day"
    """The last day in hourly bars, or the last week in daily ones."""


async def summary_for(console: Console, gateway: ConsoleGateway, viewer: Viewer, span: str) -> Summary:
    now = time.time()
    length, _ = SPANS[span]
    seen = {p.id for p in viewer.partners(console.config)}

    def visible(partner: str) -> bool:
        return viewer.administers or partner in seen

    rows = [row for row in await gateway.activity_since(now - length) if visible(row.partner)]
    since_day = datetime.fromtimestamp(now - length + 1, UTC).strftime("%Y-%m-%d")
    totals: dict[str, ModelUse] = {}
    for day in await gateway.model_use(since_day):
        if visible(day.partner):
            use = totals.setdefault(day.partner, ModelUse(partner=day.partner, tokens=0, cost=0.0, turns=0))
            use.tokens, use.cost, use.turns = use.tokens + day.tokens, use.cost + day.cost, use.turns + day.turns
    return summarize(rows, span, now, sorted(totals.values(), key=lambda m: m.partner))


def charts_of(summary: Summary) -> dict[str, Chart]:
    """The page's three charts, by name; the template titles them in the reader's language."""
    hourly = summary.bucket_s < 24 * 3600
    labels = [datetime.fromtimestamp(b.start, UTC).strftime("%H:00" if hourly else "%m-%d") for b in summary.buckets]
    every = 3 if hourly else 1
    b = summary.buckets
    return {
        "messages": bar_chart("chart-messages", labels, [("in", [x.messages_in for x in b]),
                                                         ("out", [x.messages_out for x in b])], every=every),
        "latency": bar_chart("chart-latency", labels, [("p50", [x.latency_p50_s for x in b]),
                                                       ("p99", [x.latency_p99_s for x in b])], unit=" s", every=every),
        "problems": bar_chart("chart-problems", labels, [("drop", [x.drops for x in b]),
                                                         ("error", [x.errors for x in b])], every=every),
    }


def routes(console: Console) -> list[BaseRoute]:
    def running() -> ConsoleGateway:
        assert console.gateway is not None, "the dashboard needs the running gateway"
        return console.gateway

    async def page(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        span = request.query_params.get("span", "day")
        if span not in SPANS:
            return error_response(400, "span is day or week")
        summary = await summary_for(console, running(), viewer, span)
        return console.render(request, "dashboard.html", viewer=viewer, csrf=session.csrf, summary=summary,
                              charts=charts_of(summary), span=span)

    async def api(request: Request, viewer: Viewer, session: ConsoleSession) -> Response:
        span = request.query_params.get("span", "day")
        if span not in SPANS:
            return error_response(400, "span is day or week")
        return JSONResponse((await summary_for(console, running(), viewer, span)).model_dump(mode="json"))

    return [
        Route("/dashboard", console.guarded(page, api=False)),
        Route("/api/dashboard", describe(console.guarded(api, api=True),
                                         get=Operation("Messages, latency, drops, errors and model use", answers=Summary,
                                                       query=SpanQuery))),
    ]
