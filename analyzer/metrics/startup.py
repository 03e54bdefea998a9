"""Startup phases and the run's configuration, from the marker lines the scan kept.

Weight load, KV cache allocation and graph captures of the last startup in the log
(a log can hold several), the scheduler's effective limits, and the few settings
that decide speculative speed, read from `server_args`.
"""

from __future__ import annotations

import math
import re
from typing import Any

from analyzer.core.model import Line
from analyzer.metrics.batch_lines import NAN, epoch_ms
from analyzer.metrics.results import StartupPhase, StartupSummary
from analyzer.sglang.log_format import parse_server_args

ELAPSED = re.compile(r"(?:elapsed=|Time elapsed: )(\d+(?:\.\d+)?) ?s")
MEM_USAGE = re.compile(r"mem usage=(\d+(?:\.\d+)?) GB")
MODEL_TYPE = re.compile(r"\btype=(\w+)")
KV_TOKENS = re.compile(r"#tokens: (\d+)")
KV_SIZE = re.compile(r"\b(?:KV|K|V) size: (\d+(?:\.\d+)?) GB")
KV_DTYPE = re.compile(r"dtype: ([\w.]+)")
CAPTURE = re.compile(r"Capture (.+?) (begin|end)\b")
SCHEDULER_LIMIT = re.compile(
    r"\b(max_total_num_tokens|chunked_prefill_size|max_prefill_tokens|max_running_requests"
    r"|context_len)=(-?\d+)"
)
READY_MARKER = "The server is fired up and ready to roll"


def startup(
    events: list[Line], first_time: float
) -> tuple[StartupSummary, dict[str, Any] | None, int | None]:
    """Startup phases of the last startup in the log, its server_args and their line."""
    summary = StartupSummary()
    server_args, args_line = None, None
    reference: str | None = None
    begins: dict[str, float] = {}
    for event in events:
        body = event.body
        if "server_args=" in body:
            parsed = parse_server_args(body)
            if parsed is not None:
                server_args, args_line = parsed, event.number
                summary.startups += 1
                if summary.startups > 1:
                    summary.phases, summary.ready_ms, summary.ready_line = [], None, None
                    summary.started_ms = epoch_ms(event.timestamp)
                    begins.clear()
            continue
        label = event.rank_label
        if label is not None:
            reference = reference or label
            if label != reference:
                continue
        _startup_event(summary, event, begins)
    if summary.started_ms is None or math.isnan(summary.started_ms):
        summary.started_ms = None if math.isnan(first_time) or first_time < 0 else first_time
    return summary, server_args, args_line


def _startup_event(summary: StartupSummary, event: Line, begins: dict[str, float]) -> None:
    body, when = event.body, epoch_ms(event.timestamp)
    if body.startswith("Load weight begin"):
        begins["weight"] = when
    elif body.startswith("Load weight end"):
        label = MODEL_TYPE.search(body)
        seconds = _elapsed(body, begins.pop("weight", NAN), when)
        summary.phases.append(
            StartupPhase(
                "weight_load", label[1] if label else "weights", event.number, seconds, _mem(body)
            )
        )
    elif body.startswith("KV Cache is allocated"):
        tokens = KV_TOKENS.search(body)
        sizes = [float(s) for s in KV_SIZE.findall(body)]
        dtype = KV_DTYPE.search(body)
        summary.phases.append(
            StartupPhase(
                "kv_cache",
                dtype[1] if dtype else "",
                event.number,
                tokens=int(tokens[1]) if tokens else None,
                size_gb=round(sum(sizes), 2) if sizes else None,
            )
        )
    elif body.startswith("Capture "):
        capture = CAPTURE.match(body)
        if capture is None:
            return
        name, edge = capture[1], capture[2]
        if edge == "begin":
            begins[name] = when
            return
        seconds = _elapsed(body, begins.pop(name, NAN), when)
        summary.phases.append(
            StartupPhase("graph_capture", name, event.number, seconds, _mem(body))
        )
    elif body.startswith("max_total_num_tokens="):
        summary.limits.update({k: int(v) for k, v in SCHEDULER_LIMIT.findall(body)})
    elif body.startswith(READY_MARKER) and summary.ready_ms is None:
        summary.ready_ms = None if math.isnan(when) else when
        summary.ready_line = event.number


def _elapsed(body: str, began: float, ended: float) -> float | None:
    """The logged elapsed time, else the difference of the two lines' timestamps."""
    found = ELAPSED.search(body)
    if found:
        return float(found[1])
    if math.isnan(began) or math.isnan(ended):
        return None
    return round((ended - began) / 1000, 3)


def _mem(body: str) -> float | None:
    found = MEM_USAGE.search(body)
    return float(found[1]) if found else None


CONFIG_KEYS = (
    "model",
    "algorithm",
    "draft",
    "num_steps",
    "eagle_topk",
    "num_draft_tokens",
    "cuda_graph",
    "tp",
    "dp",
    "max_running_requests",
)


GRAPH_LIMIT_DESTS = ("cuda_graph_max_bs_decode", "cuda_graph_max_bs")


def graph_limit_flag(server_args: dict[str, Any] | None) -> str:
    """The flag capping CUDA-graph decode batches, as the SGLang that wrote the log spells it.

    server_args names its fields by dest, so the log itself says which release it came
    from (0.5.23 split `--cuda-graph-max-bs` into -decode and -prefill); without that
    record, the newest shipped catalog's spelling.
    """
    from analyzer.sglang.catalog import load_catalog

    for dest in GRAPH_LIMIT_DESTS:
        if server_args and dest in server_args:
            return "--" + dest.replace("_", "-")
    catalog = load_catalog()
    spec = next(filter(None, (catalog.by_dest(d) for d in GRAPH_LIMIT_DESTS)))
    return spec.long


def run_config(server_args: dict[str, Any] | None, limits: dict[str, int]) -> dict[str, Any]:
    """The settings that decide speculative speed, from server_args and the scheduler line.

    `max_running_requests` falls back to the scheduler's effective value when the
    flag was left unset.
    """
    args = server_args or {}
    algorithm = args.get("speculative_algorithm")
    if algorithm is not None:
        algorithm = str(algorithm).rsplit(".", 1)[-1].upper()
    cuda_graph = None
    if "disable_cuda_graph" in args:
        cuda_graph = not (args.get("disable_cuda_graph") or args.get("disable_decode_cuda_graph"))
    max_running = args.get("max_running_requests")
    if max_running is None:
        max_running = limits.get("max_running_requests")
    return {
        "model": args.get("model_path"),
        "algorithm": algorithm,
        "draft": args.get("speculative_draft_model_path"),
        "num_steps": args.get("speculative_num_steps"),
        "eagle_topk": args.get("speculative_eagle_topk"),
        "num_draft_tokens": args.get("speculative_num_draft_tokens"),
        "cuda_graph": cuda_graph,
        "tp": args.get("tp_size"),
        "dp": args.get("dp_size"),
        "max_running_requests": max_running,
    }
