"""Bar charts as inline SVG, drawn on the server: no script, no library, nothing from a CDN.

The console's CSP allows no script, so a chart is geometry computed here and written into the
page by ``templates/charts.html``; each bar carries its number in a ``<title>`` (a tooltip, and
what a screen reader says) and as ``data-value`` (what the tests read).
"""

from __future__ import annotations

from pydantic import BaseModel

WIDTH, HEIGHT, PAD_TOP, PAD_BOTTOM = 720.0, 180.0, 12.0, 22.0


class Bar(BaseModel):
    x: float
    y: float
    width: float
    height: float
    value: float
    shown: str
    """The value as the tooltip says it."""
    series: str
    """A CSS class: which series the bar belongs to."""
    label: str


class Tick(BaseModel):
    x: float
    text: str


class Chart(BaseModel):
    id: str
    width: float = WIDTH
    height: float = HEIGHT
    bars: list[Bar]
    ticks: list[Tick]
    top: str
    """The largest value, written at the top of the axis."""
    series: list[str]
    """The series' CSS classes, in order (the template gives each its legend, in the reader's language)."""


def bar_chart(chart_id: str, labels: list[str], series: list[tuple[str, list[float | None]]],
              *, unit: str = "", every: int = 1) -> Chart:
    """Grouped bars: one group per label, one bar per series (css class, values; None = no bar).

    ``every``: label every n-th group only, so 24 hours stay readable."""
    values = [v for _, vs in series for v in vs if v is not None]
    top = max(values, default=0.0) or 1.0
    group = WIDTH / max(len(labels), 1)
    width = group * 0.8 / max(len(series), 1)
    plot = HEIGHT - PAD_TOP - PAD_BOTTOM
    bars = []
    for s, (css, vs) in enumerate(series):
        for i, value in enumerate(vs):
            if value is None:
                continue
            height = plot * value / top
            bars.append(Bar(x=round(i * group + group * 0.1 + s * width, 1), y=round(PAD_TOP + plot - height, 1),
                            width=round(width, 1), height=round(height, 1), value=value,
                            shown=f"{_number(value)}{unit}", series=css, label=labels[i]))
    ticks = [Tick(x=round(i * group + group / 2, 1), text=label) for i, label in enumerate(labels) if i % every == 0]
    return Chart(id=chart_id, bars=bars, ticks=ticks, top=f"{_number(top)}{unit}",
                 series=[css for css, _ in series])


def _number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:.3g}"
