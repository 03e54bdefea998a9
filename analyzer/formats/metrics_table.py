"""Rendering of `loganalyze metrics` and `loganalyze compare`: plain text and JSON.

Renderers only format the RunMetrics / Comparison they are given (never re-read a
log); floats are rounded to fixed places so the same input gives the same bytes. Text
that came from a log (paths, model names, lines) goes through `clean`.
"""

from __future__ import annotations

import json
from typing import Any

from analyzer.core.model import SCHEMA_VERSION, Incident
from analyzer.formats.json_report import incident_dict
from analyzer.formats.report_text import printable
from analyzer.formats.terminal import clean
from analyzer.metrics.batch_lines import format_ms
from analyzer.metrics.compare import Comparison, median_throughput
from analyzer.metrics.results import RunMetrics, StartupPhase, Stat
from analyzer.metrics.startup import CONFIG_KEYS

CONFIG_LABELS = {
    "model": "model",
    "algorithm": "algorithm",
    "draft": "draft",
    "num_steps": "num-steps",
    "eagle_topk": "eagle-topk",
    "num_draft_tokens": "num-draft-tokens",
    "cuda_graph": "cuda graph",
    "tp": "tp",
    "dp": "dp",
    "max_running_requests": "max-running-requests",
}
PHASE_LABELS = {
    "weight_load": "weight load",
    "kv_cache": "KV cache",
    "graph_capture": "graph capture",
}
PLACES = 4


# ---- plain text -------------------------------------------------------------------------


def render_metrics_plain(runs: list[RunMetrics], findings: list[Incident]) -> str:
    out: list[str] = []
    for run in runs:
        if out:
            out.append("")
        out += _run_lines(run)
    out += _findings_lines(findings)
    return "\n".join(out) + "\n"


def _run_lines(run: RunMetrics) -> list[str]:
    out = [f"loganalyze metrics: {clean(run.source)} ({run.lines:,} lines)"]
    settings = [f"{CONFIG_LABELS[k]} {_value(k, run.config.get(k))}" for k in CONFIG_KEYS]
    out.append("configuration: " + ", ".join(settings))
    out += _decode_lines(run)
    out += _prefill_lines(run)
    out += _startup_lines(run)
    out += [f"note: {clean(n)}" for n in run.notes]
    return out


def _decode_lines(run: RunMetrics) -> list[str]:
    decode = run.decode
    if not decode.lines:
        return ["decode: no batches logged"]
    span = _span(decode.first_time_ms, decode.last_time_ms)
    return [f"decode: {decode.lines:,} batches logged{span}"] + _aligned(decode_rows(run), 2)


def decode_rows(run: RunMetrics) -> list[tuple[str, str]]:
    """The decode summary as (name, text) rows, for the plain and HTML reports alike."""
    decode = run.decode
    rows = [
        ("gen throughput (tok/s)", _quantiles(decode.gen_throughput)),
        ("accept length", _mean_range(decode.accept_len)),
        ("accept rate", _mean_range(decode.accept_rate)),
        ("running requests", _median_max(decode.running_req)),
        ("token usage", _mean_max(decode.token_usage, "{:.2f}")),
        ("queued requests", _mean_max(decode.queue_req, "{:g}")),
        (
            "cuda graph",
            f"{decode.graph_share:.0%} of batches" if decode.graph_share is not None else None,
        ),
    ]
    return [(name, text) for name, text in rows if text]


def _prefill_lines(run: RunMetrics) -> list[str]:
    prefill = run.prefill
    if not prefill.lines:
        return ["prefill: no batches logged"]
    hit = prefill.cache_hit_share
    text = (
        f"prefill: {prefill.lines:,} batches, {prefill.new_seq:,} new sequences, "
        f"{prefill.new_tokens:,} new tokens, {prefill.cached_tokens:,} cached"
    )
    if hit is not None:
        text += f" ({hit:.1%} cache hit)"
    out = [text]
    if prefill.input_throughput:
        out += _aligned(
            [("input throughput (tok/s)", _quantiles(prefill.input_throughput))], indent=2
        )
    return out


def _startup_lines(run: RunMetrics) -> list[str]:
    startup = run.startup
    if not startup.phases and startup.ready_ms is None:
        return ["startup: no startup phases logged"]
    out = ["startup:"]
    rows = [(PHASE_LABELS.get(p.name, p.name), _phase_text(p)) for p in startup.phases]
    limits = startup.limits
    if "max_total_num_tokens" in limits:
        rows.append(
            ("KV pool", f"{limits['max_total_num_tokens']:,} tokens (max_total_num_tokens)")
        )
    ready = startup.time_to_ready_s
    if ready is not None:
        rows.append(("ready after", f"{ready:.1f} s" + _line_ref(startup.ready_line)))
    elif startup.ready_line is not None:
        rows.append(("ready", _line_ref(startup.ready_line).strip()))
    else:
        rows.append(("ready", "not in this log"))
    out += _aligned(rows, indent=2)
    return out


def _phase_text(phase: StartupPhase) -> str:
    parts = [clean(phase.label)] if phase.label else []
    if phase.seconds is not None:
        parts.append(f"{phase.seconds:.2f} s")
    if phase.mem_gb is not None:
        parts.append(f"{phase.mem_gb:.2f} GB")
    if phase.tokens is not None:
        parts.append(f"{phase.tokens:,} tokens")
    if phase.size_gb is not None:
        parts.append(f"{phase.size_gb:.2f} GB")
    return ", ".join(parts) + _line_ref(phase.line)


def _line_ref(line: int | None) -> str:
    return f" (line {line})" if line else ""


def _span(first: float | None, last: float | None) -> str:
    if first is None or last is None:
        return ""
    return f", {format_ms(first)} to {format_ms(last)} ({(last - first) / 1000:.0f} s)"


def _quantiles(stat: Stat | None) -> str | None:
    if stat is None or stat.median is None:
        return None
    return (
        f"median {stat.median:.2f}, p10 {stat.p10:.2f}, p90 {stat.p90:.2f} "
        f"(mean {stat.mean:.2f}, {stat.minimum:.2f} to {stat.maximum:.2f})"
    )


def _mean_range(stat: Stat | None) -> str | None:
    if stat is None:
        return None
    return f"mean {stat.mean:.2f} ({stat.minimum:.2f} to {stat.maximum:.2f})"


def _median_max(stat: Stat | None) -> str | None:
    if stat is None:
        return None
    median = f"median {stat.median:g}, " if stat.median is not None else ""
    return f"{median}max {stat.maximum:g}"


def _mean_max(stat: Stat | None, maximum: str) -> str | None:
    if stat is None:
        return None
    return f"mean {stat.mean:.2f}, max {maximum.format(stat.maximum)}"


def _aligned(rows: list[tuple[str, str]], indent: int) -> list[str]:
    width = max((len(name) for name, _ in rows), default=0)
    return [f"{' ' * indent}{name:<{width}}  {text}" for name, text in rows]


def _value(key: str, value: Any) -> str:
    if key == "cuda_graph" and isinstance(value, bool):
        return "on" if value else "off"
    if key == "algorithm" and value is None:
        return "none"
    return "-" if value is None else clean(str(value))


def render_compare_plain(comparison: Comparison) -> str:
    runs = comparison.runs
    out = [f"loganalyze compare: {len(runs)} runs"]
    if comparison.columns:
        out.append(
            "configuration differs in: " + ", ".join(CONFIG_LABELS[c] for c in comparison.columns)
        )
    else:
        out.append("configuration: the same in every run")
    out.append("")
    out += _table(
        compare_header(comparison), [compare_row(comparison, i) for i in range(len(runs))]
    )
    out.append("")
    out += verdict_lines(comparison)
    out += _findings_lines(comparison.findings)
    return "\n".join(out) + "\n"


def compare_header(comparison: Comparison) -> list[str]:
    metrics = [
        "decode lines",
        "tok/s median",
        "p10",
        "p90",
        "accept len",
        "accept rate",
        "running",
        "ready s",
        "vs baseline",
    ]
    return ["run", *(CONFIG_LABELS[c] for c in comparison.columns), *metrics]


def compare_row(comparison: Comparison, index: int) -> list[str]:
    run = comparison.runs[index]
    decode, stat = run.decode, run.decode.gen_throughput
    ready = run.startup.time_to_ready_s
    return [
        clean(run.source),
        *(_value(c, run.config.get(c)) for c in comparison.columns),
        f"{decode.lines:,}",
        _number(stat.median if stat else None),
        _number(stat.p10 if stat else None),
        _number(stat.p90 if stat else None),
        _number(decode.accept_len.mean if decode.accept_len else None),
        _number(decode.accept_rate.mean if decode.accept_rate else None),
        f"{decode.running_req.median:g}"
        if decode.running_req and decode.running_req.median is not None
        else "-",
        f"{ready:.1f}" if ready is not None else "-",
        _versus(comparison, index),
    ]


def _versus(comparison: Comparison, index: int) -> str:
    if index in {s.baseline for s in comparison.speedups}:
        return "baseline"
    for speedup in comparison.speedups:
        if speedup.run == index:
            word = "faster" if speedup.ratio >= 1 else "slower"
            return f"{speedup.ratio:.2f}x {word}"
    return "-"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        # Text left, numbers right: the first column and the configuration are text.
        parts = []
        for i, cell in enumerate(cells):
            numeric = i > 0 and is_number(cell)
            parts.append(cell.rjust(widths[i]) if numeric else cell.ljust(widths[i]))
        return "  ".join(parts).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def is_number(cell: str) -> bool:
    """A table cell that is a number (aligned right): 1,234 or 82.30 or 12."""
    return cell.replace(",", "").replace(".", "").replace("-", "").isdigit()


def verdict_lines(comparison: Comparison) -> list[str]:
    runs = comparison.runs
    if comparison.best is None:
        return ["best: none (no run logged decode throughput)"]
    best = runs[comparison.best]
    out = [f"best: {clean(best.source)} (median {median_throughput(best):.2f} tok/s)"]
    for s in comparison.speedups:
        spec, base = runs[s.run], runs[s.baseline]
        word = "speed-up" if s.ratio >= 1 else "slow-down"
        text = f"{word}: {clean(spec.source)} vs {clean(base.source)}: {s.ratio:.2f}x"
        if s.break_even is not None and s.accept_len is not None:
            text += f" (break-even accept length {s.break_even:.2f}, measured {s.accept_len:.2f})"
        if s.caveats:
            text += "; caveat: " + "; ".join(s.caveats)
        out.append(text)
    compared = {s.run for s in comparison.speedups}
    for index, run in enumerate(runs):
        if run.speculative and index not in compared:
            out.append(
                f"speed-up: {clean(run.source)}: no run of the same model without speculation "
                "to compare against"
            )
    return out


def _findings_lines(findings: list[Incident]) -> list[str]:
    if not findings:
        return []
    out = ["", "findings:"]
    for index, incident in enumerate(findings, start=1):
        out.append(
            f"[{index}] {incident.severity.upper()} {incident.rule_class}: {clean(incident.title)}"
        )
        out.append(f"    {clean(incident.source)}:{incident.line}")
        for line in incident.evidence:
            out.append(f"    {line.number:>6} | {clean(line.text)}")
        out.append(f"    why: {printable(incident.explanation)}")
        if incident.offending_flags:
            out.append(f"    flags: {' '.join(incident.offending_flags)}")
        out.append("    advice:")
        out += [f"      - {printable(a)}" for a in incident.advice]
    return out


# ---- JSON -------------------------------------------------------------------------------


def metrics_dict(runs: list[RunMetrics], findings: list[Incident]) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "runs": [run_dict(r) for r in runs],
        "findings": [finding_dict(i) for i in findings],
    }


def compare_dict(comparison: Comparison) -> dict[str, Any]:
    runs = comparison.runs

    def source(index: int | None) -> str | None:
        return runs[index].source if index is not None else None

    return {
        "schema_version": SCHEMA_VERSION,
        "runs": [run_dict(r) for r in runs],
        "comparison": {
            "columns": list(comparison.columns),
            "best": source(comparison.best),
            "baseline": source(comparison.baseline),
            "speedups": [
                {
                    "source": source(s.run),
                    "baseline": source(s.baseline),
                    "speedup": _round(s.ratio),
                    "accept_len": _round(s.accept_len),
                    "break_even_accept_len": _round(s.break_even),
                    "caveats": list(s.caveats),
                }
                for s in comparison.speedups
            ],
        },
        "findings": [finding_dict(i) for i in comparison.findings],
    }


def run_dict(run: RunMetrics) -> dict[str, Any]:
    decode, prefill, startup = run.decode, run.prefill, run.startup
    return {
        "source": run.source,
        "lines": run.lines,
        "speculative": run.speculative,
        "config": dict(run.config),
        "server_args_line": run.server_args_line,
        "decode": {
            "lines": decode.lines,
            "first_time": format_ms(decode.first_time_ms),
            "last_time": format_ms(decode.last_time_ms),
            "gen_throughput": _stat(decode.gen_throughput),
            "accept_len": _stat(decode.accept_len),
            "accept_rate": _stat(decode.accept_rate),
            "running_req": _stat(decode.running_req),
            "token_usage": _stat(decode.token_usage),
            "queue_req": _stat(decode.queue_req),
            "graph_share": _round(decode.graph_share),
            "dp_ranks": list(decode.dp_ranks),
        },
        "prefill": {
            "lines": prefill.lines,
            "new_seq": prefill.new_seq,
            "new_tokens": prefill.new_tokens,
            "cached_tokens": prefill.cached_tokens,
            "cache_hit_share": _round(prefill.cache_hit_share),
            "input_throughput": _stat(prefill.input_throughput),
            "queue_req": _stat(prefill.queue_req),
        },
        "startup": {
            "started": format_ms(startup.started_ms),
            "ready": format_ms(startup.ready_ms),
            "ready_line": startup.ready_line,
            "time_to_ready_s": _round(startup.time_to_ready_s),
            "startups": startup.startups,
            "limits": dict(startup.limits),
            "phases": [_phase(p) for p in startup.phases],
        },
        "chart": [
            {
                "time": format_ms(p.time_ms),
                "gen_throughput": _round(p.gen_throughput),
                "accept_len": _round(p.accept_len),
                "lines": p.lines,
            }
            for p in run.chart
        ],
        "notes": list(run.notes),
    }


def _stat(stat: Stat | None) -> dict[str, Any] | None:
    if stat is None:
        return None
    return {
        "count": stat.count,
        "mean": _round(stat.mean),
        "min": _round(stat.minimum),
        "max": _round(stat.maximum),
        "median": _round(stat.median),
        "p10": _round(stat.p10),
        "p90": _round(stat.p90),
    }


def _phase(phase: StartupPhase) -> dict[str, Any]:
    return {
        "name": phase.name,
        "label": phase.label,
        "line": phase.line,
        "seconds": phase.seconds,
        "mem_gb": phase.mem_gb,
        "tokens": phase.tokens,
        "size_gb": phase.size_gb,
    }


def finding_dict(incident: Incident) -> dict[str, Any]:
    """The same keys as an incident of the JSON report."""
    return incident_dict(incident)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, PLACES)


def render_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
