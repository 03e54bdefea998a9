"""Inline SVG line charts for the HTML report: no script, no network, escaped text.

`line_chart` is a pure function of its data (same points, same bytes), so the HTML
report can embed its output as is; `metrics_charts` draws a run's throughput and
accept length over time from `RunMetrics.chart`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

from analyzer.metrics.results import RunMetrics

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c")
Point = tuple[float, float | None]


def line_chart(
    series: Sequence[tuple[str, Sequence[Point]]],
    *,
    title: str,
    y_label: str = "",
    width: int = 640,
    height: int = 220,
    x_format: Callable[[float], str] = lambda x: f"{x:g}",
    zero_based: bool = True,
    colours: Sequence[str] | None = None,
) -> str:
    """An SVG of one or more named series of (x, y) points; a None y breaks the line.

    `zero_based` starts the y axis at 0 (for rates, so a dip is not magnified);
    `colours` (default: the palette in order) lets several charts give a run one colour.
    """
    values = [(x, y) for _, points in series for x, y in points if _finite(x) and _finite(y)]
    left, right, top, bottom = 56, 12, 28, 36
    plot_w, plot_h = width - left - right, height - top - bottom
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}" '
        'font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>',
    ]
    if not values:
        out.append(f'<text x="{left}" y="{top + plot_h / 2:.1f}">no data</text></svg>')
        return "".join(out)
    x0, x1 = _span(v[0] for v in values)
    y0, y1 = _span(v[1] for v in values)
    if zero_based and y0 > 0:
        y0 = 0.0

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return top + plot_h - (y - y0) / (y1 - y0) * plot_h

    out.append(
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#ccc"/>'
    )
    for y in (y0, (y0 + y1) / 2, y1):
        out.append(
            f'<text x="{left - 4}" y="{py(y) + 4:.1f}" text-anchor="end">{escape(_tick(y))}</text>'
        )
    for x, anchor in ((x0, "start"), (x1, "end")):
        out.append(
            f'<text x="{px(x):.1f}" y="{height - bottom + 14}" text-anchor="{anchor}">'
            f"{escape(x_format(x))}</text>"
        )
    if y_label:
        out.append(
            f'<text x="12" y="{top + plot_h / 2:.1f}" transform="rotate(-90 12 {top + plot_h / 2:.1f})"'
            f' text-anchor="middle">{escape(y_label)}</text>'
        )
    legend_x = left + 8
    for index, (name, points) in enumerate(series):
        colour = colours[index] if colours else PALETTE[index % len(PALETTE)]
        for run in _runs(points):
            coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in run)
            if len(run) == 1:
                x, y = run[0]
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2" fill="{colour}"/>')
            else:
                out.append(
                    f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
                )
        out.append(
            f'<text x="{legend_x}" y="{height - 6}" fill="{colour}">&#9632; {escape(name)}</text>'
        )
        legend_x += 24 + 7 * len(name)
    out.append("</svg>")
    return "".join(out)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _span(values) -> tuple[float, float]:
    values = list(values)
    low, high = min(values), max(values)
    if low == high:
        pad = abs(low) * 0.05 or 1.0
        return low - pad, high + pad
    return low, high


def _tick(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.2f}"


def _runs(points: Sequence[Point]) -> list[list[tuple[float, float]]]:
    """Consecutive drawable points; a missing value starts a new run."""
    runs: list[list[tuple[float, float]]] = [[]]
    for x, y in points:
        if _finite(x) and _finite(y):
            runs[-1].append((x, y))  # type: ignore[arg-type]
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


def _elapsed(x: float) -> str:
    return f"{x:.0f} s" if x < 600 else f"{x / 60:.0f} min"


def _since_start(run: RunMetrics, value: str) -> list[Point]:
    """(seconds since the run's first decode cell, value) for each chart cell."""
    start = run.chart[0].time_ms if run.chart else 0.0
    return [((p.time_ms - start) / 1000, getattr(p, value)) for p in run.chart]


def comparison_charts(runs: Sequence[RunMetrics], names: Sequence[str]) -> list[str]:
    """Every run's throughput on one chart, and the speculative runs' accept length on another,
    each run's clock starting at its own first decode batch."""
    charted = [
        (name, run, PALETTE[index % len(PALETTE)])
        for index, (name, run) in enumerate(zip(names, runs, strict=True))
        if run.chart
    ]
    if not charted:
        return []
    charts = [
        line_chart(
            [(name, _since_start(run, "gen_throughput")) for name, run, _ in charted],
            title="Decode throughput",
            y_label="tok/s",
            x_format=_elapsed,
            colours=[colour for *_, colour in charted],
        )
    ]
    accepting = [c for c in charted if any(p.accept_len is not None for p in c[1].chart)]
    if accepting:
        charts.append(
            line_chart(
                [(name, _since_start(run, "accept_len")) for name, run, _ in accepting],
                title="Accept length",
                y_label="tokens/step",
                x_format=_elapsed,
                zero_based=False,
                colours=[colour for *_, colour in accepting],
            )
        )
    return charts


def metrics_charts(run: RunMetrics) -> list[str]:
    """Throughput and (for speculative runs) accept length over time, as SVG strings."""
    if not run.chart:
        return []
    charts = [
        line_chart(
            [("gen throughput", _since_start(run, "gen_throughput"))],
            title=f"Decode throughput: {run.source}",
            y_label="tok/s",
            x_format=_elapsed,
        )
    ]
    if any(p.accept_len is not None for p in run.chart):
        charts.append(
            line_chart(
                [("accept length", _since_start(run, "accept_len"))],
                title=f"Accept length: {run.source}",
                y_label="tokens/step",
                x_format=_elapsed,
                zero_based=False,
            )
        )
    return charts
