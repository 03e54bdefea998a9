"""Runs side by side: which configuration is fastest, and does speculation pay off?

Takes RunMetrics (analyzer.metrics.results) and returns a Comparison: the configuration keys
that differ, the best run, each speculative run's speed-up against a run without
speculation, and `spec_slowdown` findings as Incidents, so they render like any other.

The break-even is derived only from what was measured. A plain decode step yields one
token per request; a speculative step yields `accept len` tokens (SGLang counts the
bonus token). With plain throughput B, speculative throughput S and mean accept
length A, one speculative step costs c = A * B / S plain steps, so speculation pays
off exactly when A > c. For one measured pair that is the same test as S > B; the
finding states both, because c is what tells how much acceptance has to improve.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyzer.core.model import Incident
from analyzer.metrics.results import RunMetrics
from analyzer.metrics.slowdown_finding import RULE_CLASS, RULE_ID
from analyzer.metrics.startup import CONFIG_KEYS

LOAD_MISMATCH = 1.25  # medians further apart than this are not the same load
SPEC_FLAGS = (
    ("algorithm", "--speculative-algorithm"),
    ("draft", "--speculative-draft-model-path"),
    ("num_steps", "--speculative-num-steps"),
    ("eagle_topk", "--speculative-eagle-topk"),
    ("num_draft_tokens", "--speculative-num-draft-tokens"),
)


@dataclass(frozen=True)
class SpeedUp:
    """A speculative run against the baseline: throughput ratio and the break-even.

    `caveats` name what else differs between the two runs (load, parallelism), because a
    throughput ratio only measures speculation when nothing else changed.
    """

    run: int
    baseline: int
    ratio: float
    accept_len: float | None
    break_even: float | None
    caveats: tuple[str, ...] = ()


@dataclass
class Comparison:
    runs: list[RunMetrics]
    columns: list[str]
    best: int | None
    baseline: int | None
    speedups: list[SpeedUp] = field(default_factory=list)
    findings: list[Incident] = field(default_factory=list)


def median_throughput(run: RunMetrics) -> float | None:
    stat = run.decode.gen_throughput
    return stat.median if stat else None


def compare(runs: list[RunMetrics]) -> Comparison:
    """Compare runs; the baseline is the fastest run without speculation (same model first)."""
    columns = [k for k in CONFIG_KEYS if len({_key(r.config.get(k)) for r in runs}) > 1]
    measured = [i for i, r in enumerate(runs) if (median_throughput(r) or 0) > 0]
    best = max(measured, key=lambda i: median_throughput(runs[i]), default=None)
    comparison = Comparison(runs, columns, best, None)
    for index, run in enumerate(runs):
        if not run.speculative:
            continue
        if index not in measured:
            comparison.findings += spec_findings(run)
            continue
        baseline = _baseline(runs, measured, run)
        if baseline is None:
            comparison.findings += spec_findings(run)
            continue
        comparison.baseline = comparison.baseline if comparison.baseline is not None else baseline
        speedup = _speedup(runs, index, baseline)
        comparison.speedups.append(speedup)
        comparison.findings += spec_findings(run, runs[baseline], speedup)
    return comparison


def _key(value: object) -> str:
    return repr(value)


def _baseline(runs: list[RunMetrics], measured: list[int], run: RunMetrics) -> int | None:
    """The fastest run without speculation of the same model (a model name that is
    unknown on either side does not rule a run out)."""
    plain = [i for i in measured if not runs[i].speculative and same_model(runs[i], run)]
    return max(plain, key=lambda i: median_throughput(runs[i]), default=None)


def same_model(a: RunMetrics, b: RunMetrics) -> bool:
    """Same checkpoint name, wherever it was loaded from (`/models/X` and `org/X`)."""
    first, second = a.config.get("model"), b.config.get("model")
    if not first or not second:
        return True
    return _model_name(first) == _model_name(second)


def _model_name(path: str) -> str:
    return str(path).rstrip("/").rsplit("/", 1)[-1].casefold()


def _speedup(runs: list[RunMetrics], index: int, baseline: int) -> SpeedUp:
    spec, plain = median_throughput(runs[index]), median_throughput(runs[baseline])
    accept = runs[index].decode.accept_len.mean if runs[index].decode.accept_len else None
    break_even = accept * plain / spec if accept is not None else None
    caveats = tuple(_caveats(runs[index], runs[baseline]))
    return SpeedUp(index, baseline, spec / plain, accept, break_even, caveats)


def _caveats(run: RunMetrics, baseline: RunMetrics) -> list[str]:
    """What besides speculation differs: the load served and the parallel layout."""
    notes = []
    mine, theirs = run.decode.running_req, baseline.decode.running_req
    if mine and theirs and mine.median and theirs.median:
        high, low = max(mine.median, theirs.median), min(mine.median, theirs.median)
        if high > low * LOAD_MISMATCH:
            notes.append(
                f"different loads (median running requests {mine.median:g} vs {theirs.median:g})"
            )
    for key in ("tp", "dp", "cuda_graph"):
        a, b = run.config.get(key), baseline.config.get(key)
        if a is not None and b is not None and a != b:
            notes.append(f"different {key.replace('_', ' ')} ({a} vs {b})")
    return notes


# ---- the finding ------------------------------------------------------------------------


def spec_findings(
    run: RunMetrics, baseline: RunMetrics | None = None, speedup: SpeedUp | None = None
) -> list[Incident]:
    """`spec_slowdown` for a speculative run that is slower than the baseline, or whose
    acceptance cannot pay for drafting whatever the baseline (mean accept length <= 1)."""
    if not run.speculative or run.decode.accept_len is None:
        return []
    accept = run.decode.accept_len.mean
    if speedup is not None and baseline is not None and speedup.ratio < 1:
        title = (
            f"Speculative decoding is slower than no speculation: {median_throughput(run):.2f} "
            f"vs {median_throughput(baseline):.2f} tok/s ({speedup.ratio:.2f}x)"
        )
        explanation = _slower_explanation(run, baseline, speedup)
    elif accept is not None and accept <= 1.0:
        title = f"Speculative decoding accepts no draft tokens (mean accept length {accept:.2f})"
        explanation = (
            f"The mean accept length is {accept:.2f}: on average no drafted token was accepted, "
            "so each speculative step produced the single token a plain decode step produces, "
            "and paid for drafting and verifying on top. A plain step yields one token, so the "
            "break-even accept length is above 1 for any drafter; this run cannot be faster "
            "than the same server without speculation."
        )
    else:
        return []
    return [_incident(run, baseline, title, explanation)]


def _slower_explanation(run: RunMetrics, baseline: RunMetrics, speedup: SpeedUp) -> str:
    spec, plain = median_throughput(run), median_throughput(baseline)
    algorithm = run.config.get("algorithm") or "speculative"
    text = (
        f"{run.source} ({algorithm}) decoded at a median {spec:.2f} tok/s; {baseline.source} "
        f"without speculation at {plain:.2f} tok/s."
    )
    if speedup.break_even is not None and speedup.accept_len is not None:
        text += (
            " A plain decode step yields one token per request, a speculative step yields the "
            f"accept length ({speedup.accept_len:.2f} on average here). At the measured speeds "
            f"one speculative step costs {speedup.accept_len:.2f} x {plain:.2f} / {spec:.2f} = "
            f"{speedup.break_even:.2f} plain steps, so speculation breaks even at a mean accept "
            f"length of {speedup.break_even:.2f}; this run reached {speedup.accept_len:.2f}."
        )
    if speedup.caveats:
        text += (
            " Caveat: the runs also differ in " + "; ".join(speedup.caveats) + ", so part of "
            "the gap may come from that rather than from speculation."
        )
    return text


def _incident(run: RunMetrics, baseline: RunMetrics | None, title: str, why: str) -> Incident:
    evidence = [ln for ln in (run.first_decode, baseline.first_decode if baseline else None) if ln]
    flags = [flag for key, flag in SPEC_FLAGS if run.config.get(key) is not None]
    line = run.first_decode.number if run.first_decode else (run.server_args_line or 0)
    return Incident(
        rule_class=RULE_CLASS,
        rule=RULE_ID,
        title=title,
        severity="warning",
        source=run.source,
        line=line,
        ranks=[],
        evidence=evidence,
        span=None,
        offending_flags=flags,
        explanation=why,
        advice=spec_advice(run),
    )


def spec_advice(run: RunMetrics) -> list[str]:
    """What is known to raise speculative speed, filled with this run's own numbers only."""
    config, decode = run.config, run.decode
    accept = decode.accept_len.mean if decode.accept_len else None
    advice = [
        "Use a drafter trained for this target model and this traffic: acceptance depends on "
        "how well the draft head predicts the target, and a head trained on more (and "
        "in-domain) data accepts more tokens per step (--speculative-draft-model-path)."
    ]
    drafts = config.get("num_draft_tokens")
    if drafts and accept is not None:
        advice.append(
            f"Draft fewer tokens: each verify step checks {drafts} tokens "
            f"(--speculative-num-draft-tokens) and keeps {accept:.2f} on average, bonus token "
            "included; tokens past the accepted prefix are verified for nothing. Lower "
            "--speculative-num-draft-tokens, and --speculative-num-steps with it."
        )
    else:
        advice.append(
            "Draft fewer tokens (--speculative-num-draft-tokens, --speculative-num-steps): "
            "tokens past the accepted prefix are verified for nothing."
        )
    topk = config.get("eagle_topk")
    advice.append(
        (
            f"Revisit --speculative-eagle-topk (now {topk}): "
            if topk
            else "Revisit --speculative-eagle-topk: "
        )
        + "topk 1 drafts a single chain, the cheapest to verify; a larger topk drafts a tree "
        "that can raise acceptance but costs more per step, most of all at large batch sizes."
    )
    advice += _graph_advice(run)
    running = decode.running_req.median if decode.running_req else None
    if running and running > 1:
        advice.append(
            f"Speculation gains most at small batch sizes; at a median of {running:g} running "
            "requests the target is closer to compute-bound and verification costs more."
        )
    return advice


def _graph_advice(run: RunMetrics) -> list[str]:
    share = run.decode.graph_share
    if run.config.get("cuda_graph") is False:
        return [
            "CUDA graphs are off (--disable-cuda-graph): speculative steps launch many small "
            "kernels, so turn them back on."
        ]
    if share is not None and share < 1:
        limit = run.config.get("max_running_requests")
        served = f" (up to {limit} running requests)" if limit else ""
        return [
            f"Only {share:.0%} of decode batches ran in a CUDA graph: raise {run.graph_limit_flag} "
            f"to cover the batch sizes served{served}."
        ]
    return []
